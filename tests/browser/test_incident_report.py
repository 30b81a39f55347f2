"""The incident report as a reader sees it: opened in headless Chromium, driven over the Chrome
DevTools Protocol on ``--remote-debugging-pipe`` (no port, no websocket library).

What is checked is what a reader sees after rendering (``document.body.innerText``): every
alert's rule, article and summary, the cards of its round, the payouts; that the page asked the
network for nothing (every request the browser made is the report's own ``file://`` URL); that it
prints (the print stylesheet keeps the suit colours, and a PDF comes out).

Needs Debian's ``chromium`` at /usr/bin/chromium (``apt-get install -y chromium``); skipped
without it. Run as a script to photograph a report for the docs:

    .venv/bin/python tests/browser/test_incident_report.py REPORT.html OUT.png [WIDTH [HEIGHT]]

(by default 1280 wide, down to the end of the first alert).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium is not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
)


class DevToolsError(RuntimeError):
    pass


class Chromium:
    """A headless Chromium on a DevTools pipe: the browser reads commands on fd 3 and writes
    replies and events on fd 4, each a JSON object ended by a NUL byte."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def child_pipes() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            read_end = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_pipes,
            pass_fds=(3, 4),
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    # ---- the protocol -------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise DevToolsError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise DevToolsError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            command["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for n, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(n)
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method:
                return message
            self.events.append(message)

    # ---- what a test needs --------------------------------------------------------------------

    def open(self, url: str, width: int = 1280, height: int = 900) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for domain in ("Network", "Page", "Runtime"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()  # only what the report itself causes
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        data = self.send(
            "Page.captureScreenshot", {"format": "png", "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def pdf(self) -> bytes:
        return base64.b64decode(self.send("Page.printToPDF", {"printBackground": True})["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except (DevToolsError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)


# ---- the tests ---------------------------------------------------------------------------------

INJECTED = "DRAW_BANKER_EXTRA,PAYOUT_MISMATCH,SQUEEZE_HOLDER,SHOE_REPEAT,BURN_COUNT,CUT_CARD_DEPTH"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """A simulated floor with irregularities put in, replayed with --report; and its alerts."""
    from click.testing import CliRunner

    from surveil.cli import main

    folder = tmp_path_factory.mktemp("incident")
    log, page, alerts = folder / "floor.jsonl", folder / "report.html", folder / "alerts.jsonl"
    runner = CliRunner()
    made = runner.invoke(main, ["simulate", "--tables", "3", "--shoes", "2", "--seed", "7", "--inject", INJECTED, "--out", str(log)])
    assert made.exit_code == 0, made.output
    replayed = runner.invoke(main, ["replay", str(log), "--report", str(page), "--alerts", str(alerts)])
    assert replayed.exit_code == 0, replayed.output
    return page, [json.loads(line)["data"] for line in alerts.read_text().splitlines()]


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)")
    chromium = Chromium()
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def seen(report: tuple[Path, list[Any]], browser: Chromium) -> str:
    """The page's text as rendered (innerText: what is visible, in reading order)."""
    browser.open(report[0].as_uri())
    text = browser.evaluate("document.body.innerText")
    assert isinstance(text, str)
    return text


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@needs_chromium
def test_every_alert_shows_its_rule_article_and_summary(report: tuple[Path, list[Any]], seen: str) -> None:
    _, alerts = report
    assert sorted(a["rule"] for a in alerts) == sorted(INJECTED.split(","))
    text = squash(seen)
    for alert in alerts:
        assert alert["rule"] in text
        assert alert["article"] in text
        assert squash(alert["summary"]) in text
    assert f"Alerts {len(alerts)}:" in text


@needs_chromium
def test_the_rounds_show_their_cards_as_cards(report: tuple[Path, list[Any]], browser: Chromium, seen: str) -> None:
    _, alerts = report
    draw = next(a for a in alerts if a["rule"] == "DRAW_BANKER_EXTRA")
    section = browser.evaluate(f'document.getElementById("alert-{draw["alert_id"]}").innerText')
    suits = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}
    for hand in ("player", "banker"):
        for index, card in zip(draw["evidence"][f"{hand}_indices"], draw["evidence"][hand]):
            row = browser.evaluate(f"document.querySelector('#alert-{draw['alert_id']} tr[data-index=\"{index}\"]').innerText")
            assert card[:-1] + suits[card[-1]] in row
            assert hand.capitalize() in row
    assert "By the rules (core.play.deal)" in section
    assert "but had to stand on 7" in squash(section)
    # hearts and diamonds are red, spades and clubs are not
    colours = browser.evaluate("[...document.querySelectorAll('.card[data-card]')].map(c => [c.dataset.card, getComputedStyle(c).color])")
    for code, colour in colours:
        red = code[-1] in "HD"
        assert (colour == "rgb(200, 16, 46)") is red, (code, colour)


@needs_chromium
def test_the_payout_mismatch_shows_what_was_paid_and_what_is_due(report: tuple[Path, list[Any]], browser: Chromium) -> None:
    _, alerts = report
    payout = next(a for a in alerts if a["rule"] == "PAYOUT_MISMATCH")
    paid, due = payout["evidence"]["differences"]["net"]["paid"], payout["evidence"]["differences"]["net"]["due"]
    row = browser.evaluate(f"document.querySelector('#alert-{payout['alert_id']} tr[data-bet=\"{payout['bet_id']}\"]').innerText")
    assert f"{paid:+,}" in row and f"{due:+,}" in row
    assert f"{paid - due:+,}" in row


@needs_chromium
def test_the_contents_link_every_alert(report: tuple[Path, list[Any]], browser: Chromium) -> None:
    _, alerts = report
    links = browser.evaluate("[...document.querySelectorAll('#contents a')].map(a => a.getAttribute('href'))")
    for alert in alerts:
        assert f"#alert-{alert['alert_id']}" in links
        assert browser.evaluate(f'!!document.getElementById("alert-{alert["alert_id"]}")')


@needs_chromium
def test_nothing_spills_out_of_its_section(report: tuple[Path, list[Any]], browser: Chromium, seen: str) -> None:
    overflowing = browser.evaluate(
        "[...document.querySelectorAll('section.alert')].filter(s => s.scrollWidth > s.clientWidth).map(s => s.dataset.rule)"
    )
    assert overflowing == []
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@needs_chromium
def test_the_page_loads_nothing_from_the_network(report: tuple[Path, list[Any]], browser: Chromium, seen: str) -> None:
    page, _ = report
    assert browser.requested_urls() == [page.as_uri()]
    resources = browser.evaluate("performance.getEntriesByType('resource').map(r => r.name)")
    assert resources == []
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.styleSheets.length") == 1 and browser.evaluate("document.styleSheets[0].href") is None


@needs_chromium
def test_it_prints(report: tuple[Path, list[Any]], browser: Chromium, seen: str) -> None:
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    # an A4 page less its margins is about 700 CSS pixels wide
    browser.send("Emulation.setDeviceMetricsOverride", {"width": 700, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    try:
        assert browser.evaluate("getComputedStyle(document.querySelector('.card.red')).color") == "rgb(200, 16, 46)"
        assert browser.evaluate("getComputedStyle(document.querySelector('.back')).display") == "none"
        assert browser.evaluate("getComputedStyle(document.documentElement).printColorAdjust") == "exact"
        overflowing = browser.evaluate(
            "[...document.querySelectorAll('section.alert')].filter(s => s.scrollWidth > s.clientWidth).map(s => s.dataset.rule)"
        )
        assert overflowing == []
    finally:
        browser.send("Emulation.setEmulatedMedia", {"media": ""})
        browser.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    pdf = browser.pdf()
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000


def photograph(report: Path, out: Path, width: int = 1280, height: int | None = None) -> None:
    """A PNG of the top of ``report``: by default down to the end of the first alert."""
    chromium = Chromium()
    try:
        chromium.open(report.resolve().as_uri(), width, 900)
        if height is None:
            bottom = chromium.evaluate(
                "(s => s ? s.getBoundingClientRect().bottom + window.scrollY + 16 : 900)(document.querySelector('section.alert'))"
            )
            height = int(bottom)
        chromium.screenshot(out, width, height)
    finally:
        chromium.close()


if __name__ == "__main__":
    size = [int(x) for x in sys.argv[3:5]]
    photograph(Path(sys.argv[1]), Path(sys.argv[2]), *size)
    print(f"{sys.argv[2]} written")
