"""What the console's pages show: the live list and its filters, an alert's round as the report
shows it, the floor, Alertmanager's paging banner."""

from __future__ import annotations

import json
import re

from conftest import WEBHOOK_TOKEN, Room
from surveil.console.app import Hub
from surveil.events import codec
from surveil.events import models as m
from unit.analysis.incident_dom import parse


def logged_in(room: Room, user: str = "sam"):  # type: ignore[no-untyped-def]
    client = room.client()
    room.login(client, user)
    return client


def rows(html: str) -> list[dict[str, str]]:
    return [{k[5:]: v for k, v in r.attrs.items() if k.startswith("data-")} for r in parse(html).find_all("tr", cls="alert-row")]


def test_the_list_shows_every_alert_newest_first_and_counts_the_open_ones_by_severity(room: Room) -> None:
    page = logged_in(room).get("/").text
    listed = rows(page)
    by_time = sorted(enumerate(room.alerts), key=lambda pair: (pair[1].time, pair[0]), reverse=True)  # ties: the later read first
    assert [r["alert"] for r in listed] == [a.data.alert_id for _, a in by_time]
    counts = {
        n.attrs["data-count"]: n.find("span", cls="n").text() for n in parse(page).find_all("a", cls="sev") if "data-count" in n.attrs
    }
    raised = [a.data.severity for a in room.alerts]
    assert raised.count("critical") >= 2  # the floor's result against the cards and its switched card
    assert counts == {severity: str(raised.count(severity)) for severity in ("critical", "warning", "info")}


def test_the_filters_narrow_the_list(room: Room) -> None:
    client = logged_in(room)
    assert {r["table"] for r in rows(client.get("/?table=T02").text)} == {"T02"}
    assert [r["rule"] for r in rows(client.get("/?rule=PAYOUT_MISMATCH").text)] == ["PAYOUT_MISMATCH"]
    assert rows(client.get("/?severity=info").text) == []
    assert "No alerts match the filters." in client.get("/?severity=info").text
    room.console.deliver([action(room.alerts[0], "close", reason="confirmed")])
    assert [r["alert"] for r in rows(client.get("/?status=closed").text)] == [room.alerts[0].data.alert_id]
    assert room.alerts[0].data.alert_id not in {r["alert"] for r in rows(client.get("/?status=open").text)}
    counts = re.search(r'data-count="critical"><span class="n">(\d+)', client.get("/").text)
    assert counts is not None and counts.group(1) == "2"  # the closed one is no longer open


def action(alert: m.AlertRaised, what: str, **fields: str) -> m.AlertAction:
    data = m.AlertActionData(
        table_id=alert.data.table_id, alert_id=alert.data.alert_id, action=what, user="sam", role="supervisor", **fields
    )  # type: ignore[arg-type]
    return codec.make(m.AlertAction, data, id=f"act-{what}-{alert.data.alert_id}", source="test", time=alert.time)


def test_an_alert_page_shows_the_round_as_the_report_does_the_article_and_the_bead_road(room: Room) -> None:
    mismatch = next(a for a in room.alerts if a.data.rule == "CARD_MISMATCH")
    page = parse(logged_in(room, "olivia").get(f"/alerts/{mismatch.data.alert_id}").text)
    row = page.find("tr", data_index=str(mismatch.data.evidence["index"]))
    assert "bad" in row.classes and "the hand shows 2\u2660, the shoe read 2\u2665" in row.text()
    assert page.find("table", cls="hands") is not None and page.find("table", cls="bets") is not None
    article = page.by_id("article").text()
    assert "Art. 5: Card values" in article or "Art." in article
    assert page.find("table", cls="evidence") is not None
    beads = [b.text() for b in page.by_id("bead-road").find_all("span", cls="bead")]
    assert beads == ["B", "P"]  # the shoe's two rounds: a Banker natural, then the Player's 9 against 8


def test_an_alert_page_quotes_the_article_the_alert_names(room: Room) -> None:
    mismatch = next(a for a in room.alerts if a.data.rule == "RESULT_MISMATCH")
    text = parse(logged_in(room).get(f"/alerts/{mismatch.data.alert_id}").text).by_id("article").text()
    assert "Art. 11: The winner" in text and "The hand with the higher total wins." in text


def test_an_alert_raised_before_its_round_was_read_shows_the_round_once_it_is(room: Room) -> None:
    from surveil.console.app import Console

    console = Console(room.console.config, room.console.users, room.writer)
    room.writer.console = console
    alert = room.alerts[0]
    console.deliver([alert])  # the alerts' topic read ahead of the table's
    console.deliver(room.events)
    console.mark_caught_up()
    room.console = console
    page = parse(logged_in(room).get(f"/alerts/{alert.data.alert_id}").text)
    assert page.find("div", cls="round") is not None


def test_the_floor_shows_every_table_coloured_by_its_worst_open_alert(room: Room) -> None:
    page = parse(logged_in(room).get("/floor").text)
    tiles = {t.attrs["data-table"]: t for t in page.find_all("a", cls="tile")}
    assert set(tiles) == {"T01", "T02"}
    assert "critical" in tiles["T01"].classes and "critical" in tiles["T02"].classes
    text = tiles["T01"].text()
    assert "shoe T01-S1" in text and "dealer D01" in text and "last B 9-8" in text  # the result as declared
    assert "2 alerts this shift" in text and "1 alert this shift" in tiles["T02"].text()  # by the floor's clock
    room.console.deliver([action(a, "close", reason="false_alarm") for a in room.alerts if a.data.table_id == "T02"])
    tiles = {t.attrs["data-table"]: t for t in parse(logged_in(room).get("/floor").text).find_all("a", cls="tile")}
    assert "clear" in tiles["T02"].classes
    assert page.by_id("floor-search") is not None


# ---- Alertmanager's page ------------------------------------------------------------------

FIRING = {
    "version": "4",
    "groupKey": '{}:{alertname="SurveilConsumerLagHigh"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "surveil-console",
    "groupLabels": {"alertname": "SurveilConsumerLagHigh"},
    "commonLabels": {"alertname": "SurveilConsumerLagHigh", "severity": "critical"},
    "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "SurveilConsumerLagHigh", "severity": "critical", "group": "settlement"},
            "annotations": {
                "summary": "settlement is 40,000 events behind",
                "runbook_url": "https://runbooks.example/lag",
            },
            "startsAt": "2026-11-29T11:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph",
            "fingerprint": "c2f0b1a3d4e5f607",
        }
    ],
}


def test_the_webhook_without_the_token_is_refused(room: Room) -> None:
    client = room.client()
    assert client.post("/api/alertmanager", json=FIRING).status_code == 401
    assert client.post("/api/alertmanager", json=FIRING, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/alertmanager", json=FIRING, headers={"Authorization": WEBHOOK_TOKEN}).status_code == 401
    assert room.console.pages == {}


def test_without_a_configured_token_the_webhook_is_closed(room: Room) -> None:
    import dataclasses

    room.console.config = dataclasses.replace(room.console.config, webhook_token="")
    response = room.client().post("/api/alertmanager", json=FIRING, headers={"Authorization": "Bearer "})
    assert response.status_code == 503 and room.console.pages == {}


def test_a_firing_page_is_a_banner_on_every_page_until_resolved(room: Room) -> None:
    hub_messages: list[tuple[str, str]] = []
    room.console.hub = Hub()
    room.console.hub.publish = lambda event, data, floor_only=False: hub_messages.append((event, data))  # type: ignore[method-assign]
    auth = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    response = room.client().post("/api/alertmanager", json=FIRING, headers=auth)
    assert response.status_code == 200 and response.json() == {"firing": 1}
    client = logged_in(room, "audrey")
    for path in ("/", "/floor", f"/alerts/{room.alerts[0].data.alert_id}"):
        banner = parse(client.get(path).text).by_id("banner").text()
        assert "PAGE CRITICAL: SurveilConsumerLagHigh settlement is 40,000 events behind" in banner, path
    assert hub_messages and hub_messages[-1][0] == "page" and "SurveilConsumerLagHigh" in json.loads(hub_messages[-1][1])["html"]
    resolved = {**FIRING, "status": "resolved", "alerts": [{**FIRING["alerts"][0], "status": "resolved"}]}  # type: ignore[dict-item]
    assert room.client().post("/api/alertmanager", json=resolved, headers=auth).status_code == 200
    assert "PAGE" not in parse(client.get("/").text).by_id("banner").text()
    assert json.loads(hub_messages[-1][1])["html"].strip() == ""


def test_the_webhook_refuses_what_is_not_alertmanagers(room: Room) -> None:
    auth = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    client = room.client()
    assert client.post("/api/alertmanager", content=b"not json", headers=auth).status_code == 400
    assert client.post("/api/alertmanager", json={**FIRING, "version": "3"}, headers=auth).status_code == 400
    assert client.post("/api/alertmanager", json={"alerts": 7}, headers=auth).status_code == 400
    assert client.post("/api/alertmanager", content=b"x" * (2 << 20), headers=auth).status_code == 413
    assert room.console.pages == {}
