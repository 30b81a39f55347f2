// The console's live side: one server-sent event stream per page (/events), pushing rows, counts,
// tiles and the paging banner as they change. No framework: the server renders every fragment.
(function () {
  "use strict";
  const body = document.body;
  const params = new URLSearchParams(location.search);
  const filters = ["table", "rule", "severity", "status"].map((k) => [k, params.get(k) || ""]);
  const rows = document.getElementById("alert-rows");
  const maxRows = 500;

  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  function matches(row) {
    return filters.every(([k, v]) => !v || row.dataset[k] === v);
  }

  function onAlert(msg) {
    if (rows) {
      const row = fragment(msg.html);
      const old = document.getElementById(row.id);
      if (old) {
        if (matches(row)) old.replaceWith(row); else old.remove();
      } else if (matches(row)) {
        rows.prepend(row);
        row.classList.add("fresh");
        const none = document.getElementById("no-alerts");
        if (none) none.remove();
        while (rows.children.length > maxRows) rows.lastElementChild.remove();
      }
    }
    const head = document.getElementById("alert-head");
    if (head && head.dataset.alert === msg.id) {
      fetch("/alerts/" + encodeURIComponent(msg.id) + "/handling", { credentials: "same-origin" })
        .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
        .then((html) => { document.getElementById("handling").innerHTML = html; })
        .catch(() => location.reload());
    }
  }

  function onCounts(counts) {
    for (const [severity, n] of Object.entries(counts)) {
      const el = document.querySelector('[data-count="' + severity + '"] .n');
      if (el) el.textContent = n;
    }
  }

  const search = document.getElementById("floor-search");
  const query = () => (search ? search.value.trim().toLowerCase() : "");

  function onTile(msg) {
    // Only the tile that changed is touched: a thousand tables change a few dozen tiles a second.
    const old = document.getElementById("tile-" + msg.id);
    const tile = fragment(msg.html);
    const q = query();
    tile.hidden = Boolean(q) && !tile.dataset.search.includes(q);
    if (old) old.replaceWith(tile);
    else {
      const tiles = document.getElementById("tiles");
      if (tiles) tiles.append(tile);
      countShown();
    }
  }

  function countShown() {
    const count = document.getElementById("floor-shown");
    if (count) count.textContent = document.querySelectorAll("#tiles .tile:not([hidden])").length;
  }

  function applySearch() {
    const q = query();
    for (const tile of document.querySelectorAll("#tiles .tile")) tile.hidden = Boolean(q) && !tile.dataset.search.includes(q);
    countShown();
  }
  if (search) search.addEventListener("input", applySearch);

  const source = new EventSource(body.dataset.stream);
  const on = (name, handler) => source.addEventListener(name, (e) => handler(JSON.parse(e.data)));
  on("alert", onAlert);
  on("counts", onCounts);
  on("tile", onTile);
  on("page", (msg) => { document.getElementById("banner").innerHTML = msg.html; });
  on("ready", () => { if (document.getElementById("catching-up")) location.reload(); });
  on("reload", () => { source.close(); location.reload(); });
  source.onopen = () => { body.classList.remove("offline"); body.dataset.live = "open"; };
  source.onerror = () => {
    body.classList.add("offline");
    body.dataset.live = "closed";
    // Closed for good (a session that ended answers 401): the reload shows the login page.
    if (source.readyState === EventSource.CLOSED) setTimeout(() => location.reload(), 2000);
  };
})();
