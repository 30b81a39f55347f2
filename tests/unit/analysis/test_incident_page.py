"""The incident report's HTML, parsed: ``surveil replay LOG --report FILE.html`` on a simulated
floor with irregularities put in, and on scripted logs; what each section shows, and that the page
stands alone (no scripts, nothing fetched)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from incident_dom import Node, parse

from support.scenario import BANKER_NATURAL, BetSpec, Scenario, lines, table
from surveil.analysis.incident import IncidentCollector, card_text
from surveil.analysis.replay import replay
from surveil.analysis.report import stake_of
from surveil.cli import main
from surveil.core.cards import CARDS
from surveil.core.money import Spot
from surveil.core.play import hand_total
from surveil.core.profiles import load_profile
from surveil.events import models as m

INJECTED = ("DRAW_BANKER_EXTRA", "PAYOUT_MISMATCH", "SQUEEZE_HOLDER", "SHOE_REPEAT", "BURN_COUNT", "CUT_CARD_DEPTH")
PLAYER_DRAWS = ["2H", "3C", "3D", "KS", "4H", "5C"]  # P 2+3=5 draws 4 -> 9; B 3 draws on a 4 -> 8


class Floor:
    """A simulated floor replayed with --report: the page, the alerts, the labels."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "floor.jsonl"
        self.page_file = folder / "report.html"
        alerts_file = folder / "alerts.jsonl"
        runner = CliRunner()
        made = runner.invoke(
            main, ["simulate", "--tables", "3", "--shoes", "2", "--seed", "7", "--inject", ",".join(INJECTED), "--out", str(self.log)]
        )
        assert made.exit_code == 0, made.output
        replayed = runner.invoke(main, ["replay", str(self.log), "--report", str(self.page_file), "--alerts", str(alerts_file)])
        assert replayed.exit_code == 0, replayed.output
        self.html = self.page_file.read_text(encoding="utf-8")
        self.page = parse(self.html)
        self.alerts = [msgspec.json.decode(line, type=m.AlertRaised) for line in alerts_file.read_bytes().splitlines()]
        self.labels = [json.loads(line) for line in (folder / "floor.labels.jsonl").read_text().splitlines()]

    def alert(self, rule: str) -> m.AlertRaisedData:
        [found] = [a.data for a in self.alerts if a.data.rule == rule]
        return found

    def section(self, rule: str) -> Node:
        return self.page.by_id(f"alert-{self.alert(rule).alert_id}")


@pytest.fixture(scope="module")
def floor(tmp_path_factory: pytest.TempPathFactory) -> Floor:
    return Floor(tmp_path_factory.mktemp("floor"))


def page_of(events: list[m.Event], name: str = "scripted.jsonl") -> tuple[Node, list[m.AlertRaised]]:
    collector = IncidentCollector(name)
    result = replay(iter(lines(events)), on_event=collector.event, on_alert=collector.alert)
    return parse(collector.render(result)), result.alerts


def money_round(s: Scenario) -> None:
    s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1000), BetSpec("P2", Spot.PLAYER, 2000, seat="2")])


def cards_shown(node: Node) -> list[str]:
    return [n.attrs["data-card"] for n in node.find_all("span", cls="card") if "data-card" in n.attrs]


# ---- the header and the contents --------------------------------------------------------------


def test_the_header_names_the_log_the_span_the_tables_and_counts_the_alerts(floor: Floor) -> None:
    head = floor.page.find("header").text()
    assert "floor.jsonl" in head
    assert re.search(r"Time span 2026-11-29 \d\d:\d\d:\d\d UTC to 2026-11-29 \d\d:\d\d:\d\d UTC", head)
    assert "Tables 3: T001 (2), T002 (2), T003 (2)" in head
    severities = {s: sum(a.data.severity == s for a in floor.alerts) for s in ("critical", "warning")}
    assert f"Alerts {len(floor.alerts)}: {severities['critical']} critical, {severities['warning']} warning" in head
    assert f"Money at stake {sum(map(stake_of, floor.alerts)):,}" in head
    rows = {r.find_all("td")[1].text(): r.text() for r in floor.page.find("table", cls="by-rule").find_all("tr")[1:]}
    assert set(rows) == set(INJECTED)
    payout = floor.alert("PAYOUT_MISMATCH")
    assert rows["PAYOUT_MISMATCH"] == f"critical PAYOUT_MISMATCH 1 {payout.evidence['stake']:,}"
    assert f"Paid against the rules {payout.evidence['difference']:+,}" in head


def test_the_contents_link_every_alert_in_order_of_severity(floor: Floor) -> None:
    toc = floor.page.by_id("contents")
    links = [a.attrs["href"] for a in toc.find_all("a") if a.text().isdigit()]
    assert sorted(links) == sorted(f"#alert-{a.data.alert_id}" for a in floor.alerts)
    sections = floor.page.find_all("section", cls="alert")
    assert [f"#{s.attrs['id']}" for s in sections] == links
    severities = [s.find("span", cls="sev").text() for s in sections]
    assert severities == sorted(severities, key=["critical", "warning", "info"].index)


def test_each_alert_shows_rule_article_summary_ids_and_evidence(floor: Floor) -> None:
    for alert in floor.alerts:
        d = alert.data
        section = floor.page.by_id(f"alert-{d.alert_id}")
        assert section.attrs["data-rule"] == d.rule
        assert section.find("code", cls="rule").text() == d.rule
        assert section.find("span", cls="article").text() == d.article
        assert section.find("p", cls="summary").text() == d.summary
        ids = section.find("p", cls="ids").text()
        for value in (d.table_id, d.shoe_id, d.round_id, d.bet_id, d.patron_id, d.dealer_id):
            assert value is None or value in ids
        evidence = section.find("table", cls="evidence")
        for key in d.evidence:
            assert any(th.text() == key for th in evidence.find_all("th"))


# ---- round alerts -------------------------------------------------------------------------------


def test_a_draw_error_lays_out_the_round_in_shoe_order_and_the_correct_play(floor: Floor) -> None:
    d = floor.alert("DRAW_BANKER_EXTRA")
    section = floor.section("DRAW_BANKER_EXTRA")
    order = section.find("table", cls="cards-order")
    for hand in ("player", "banker"):
        for position, (index, card) in enumerate(zip(d.evidence[f"{hand}_indices"], d.evidence[hand]), start=1):
            row = order.find("tr", data_index=str(index))
            assert row.attrs["data-hand"] == hand
            assert cards_shown(row) == [card]
            assert card_text(card) in row.text()
            assert f"{hand.capitalize()} {['1st', '2nd', '3rd'][position - 1]} card" in row.text()
    hands = section.find("table", cls="hands")
    dealt, declared, ruled = (hands.find("tr", data_row=k) for k in ("dealt", "declared", "rules"))
    assert cards_shown(dealt) == d.evidence["player"] + d.evidence["banker"]
    assert cards_shown(ruled) == d.evidence["player"] + d.evidence["banker"][:2]  # the Banker stands
    assert "bad" in ruled.classes
    totals = [hand_total([CARDS[c] for c in d.evidence[hand]]) for hand in ("player", "banker")]
    assert [td.text() for td in dealt.find_all("td")[2:4]] == [str(t) for t in totals]
    third = d.evidence["banker"][2], d.evidence["banker_indices"][2]
    differences = section.find("ul", cls="differences").text()
    assert (
        f"Banker drew the {card_text(third[0])} (card {third[1]}) but had to stand on {d.evidence['banker_two_card_total']} ({d.article})"
        in differences
    )
    assert declared.find_all("td")[1].text() == dealt.find_all("td")[2].text()


def test_a_payout_mismatch_shows_paid_and_due_for_the_bet(floor: Floor) -> None:
    d = floor.alert("PAYOUT_MISMATCH")
    section = floor.section("PAYOUT_MISMATCH")
    row = section.find("tr", data_bet=d.bet_id or "")
    assert {"bad", "focus"} <= row.classes
    cells = [td.text() for td in row.find_all("td")]
    net = d.evidence["differences"]["net"]
    assert cells[0] == d.bet_id and cells[1] == d.patron_id
    assert f"win {net['paid']:+,}" in cells[6]  # paid (bet.settled)
    assert f"win {net['due']:+,}" in cells[7]  # rules give
    assert cells[-1] == f"{d.evidence['difference']:+,}"
    # every other bet of the round was paid as the rules give
    for other in section.find("table", cls="bets").find_all("tr", test=lambda n: "data-bet" in n.attrs and n.attrs["data-bet"] != d.bet_id):
        assert other.find_all("td")[-1].text() == "0"
    assert "commission five_percent" in section.text()


def test_a_squeeze_by_the_wrong_patron_names_the_holder(floor: Floor) -> None:
    d = floor.alert("SQUEEZE_HOLDER")
    text = floor.section("SQUEEZE_HOLDER").text()
    assert f"cards held by {d.evidence['squeezed_by']} (squeeze, Art. 16)" in text
    assert any(
        d.evidence["squeezed_by"] in r.text() and "standing" in r.text()
        for r in floor.section("SQUEEZE_HOLDER").find_all("tr", cls="focus")
    )


# ---- shoe alerts --------------------------------------------------------------------------------


def test_a_shoe_repeat_sets_the_two_runs_side_by_side(floor: Floor) -> None:
    [label] = [x for x in floor.labels if x["code"] == "SHOE_REPEAT"]
    later_first, later_last, earlier_first, earlier_last = map(int, re.findall(r"\d+", label["description"])[:4])
    d = floor.alert("SHOE_REPEAT")
    section = floor.section("SHOE_REPEAT")
    text = section.text()
    count = later_last - later_first + 1
    assert (
        f"{count} cards in the same order: cards {later_first}–{later_last} of shoe {d.shoe_id} are cards "
        f"{earlier_first}–{earlier_last} of shoe S0001, the shoe before at this table."
    ) in text
    strips = section.find_all("table", cls="pair")
    later = [c for s in strips for c in cards_shown(s.find_all("tr")[0])]
    earlier = [c for s in strips for c in cards_shown(s.find_all("tr")[1])]
    assert later == earlier and len(later) == count
    assert d.evidence["run"] == later[d.evidence["index"] - later_first - 7 : d.evidence["index"] - later_first + 1]


def test_a_burn_count_shows_the_burned_cards(floor: Floor) -> None:
    d = floor.alert("BURN_COUNT")
    section = floor.section("BURN_COUNT")
    strip = section.find("div", cls="strip")
    shown = cards_shown(strip)
    assert shown[: d.evidence["seen_count"]] == d.evidence["burned"]
    assert "first card dealt" in strip.text()
    assert f"Due {d.evidence['expected_count']}, burned {d.evidence['seen_count']}." in section.text()


def test_a_shallow_cut_card_shows_where_it_went(floor: Floor) -> None:
    d = floor.alert("CUT_CARD_DEPTH")
    section = floor.section("CUT_CARD_DEPTH")
    assert (
        f"The cut card came out after card {d.evidence['cards_before']}, leaving {d.evidence['cards_behind']} cards behind it"
    ) in section.text()
    cells = section.find("div", cls="end-of-shoe").find_all("div", cls="cell")
    cut = next(n for n, c in enumerate(cells) if "cut-card" in c.classes)
    assert cells[cut - 1].find("div", cls="idx").text() == str(d.evidence["cards_before"])
    behind = [c for c in cells if "behind" in c.classes]
    assert len(behind) == d.evidence["cards_behind"]


# ---- the page stands alone ----------------------------------------------------------------------


def test_the_page_stands_alone(floor: Floor) -> None:
    tags = {n.tag for n in floor.page.iter()}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source"}
    assert len(floor.page.find_all("style")) == 1
    style = floor.page.find("style").text()
    assert "url(" not in style and "@import" not in style and "@font-face" not in style
    for node in floor.page.iter():
        for name in ("src", "href", "action", "srcset", "poster"):
            value = node.attrs.get(name)
            assert value is None or value.startswith("#"), (node.tag, name, value)
    assert '<meta charset="utf-8">' in floor.html
    assert "@media print" in style


def test_cards_are_text_with_suit_symbols_red_for_hearts_and_diamonds(floor: Floor) -> None:
    cards = [n for n in floor.page.find_all("span", cls="card") if "data-card" in n.attrs]
    assert len(cards) > 100
    suits = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}
    for node in cards:
        code = node.attrs["data-card"]
        assert node.text() == code[:-1] + suits[code[-1]]
        assert ("red" in node.classes) is (code[-1] in "HD")


# ---- scripted logs --------------------------------------------------------------------------------


def test_a_wrong_result_marks_the_declared_row() -> None:
    page, alerts = page_of(table(lambda s: s.round(PLAYER_DRAWS, declare={"outcome": "banker"})))
    [alert] = alerts
    section = page.by_id(f"alert-{alert.data.alert_id}")
    declared = section.find("tr", data_row="declared")
    assert "bad" in declared.classes and declared.text().endswith("9 8 Banker wins")
    assert section.find("tr", data_row="dealt").text().endswith("9 8 Player wins")
    assert "The declared result is not what the cards say" in section.find("ul", cls="differences").text()


def test_a_switched_card_shows_the_hand_and_the_shoe_read() -> None:
    def switch(player: list[m.HandCard], banker: list[m.HandCard]) -> None:
        player[0] = m.HandCard(index=player[0].index, card="2S")

    page, alerts = page_of(table(lambda s: s.round(PLAYER_DRAWS, bend=switch)))
    [alert] = alerts
    row = page.by_id(f"alert-{alert.data.alert_id}").find("tr", data_index=str(alert.data.evidence["index"]))
    assert "bad" in row.classes
    assert cards_shown(row) == ["2H", "2S", "2H"]  # the shoe's card, then: the hand shows 2S, the shoe read 2H
    assert "the hand shows 2\u2660, the shoe read 2\u2665" in row.text()


def test_unsettled_and_twice_settled_bets() -> None:
    events = table(money_round)
    settled = [i for i, e in enumerate(events) if isinstance(e, m.BetSettled) and e.data.round_id == "T01-S1-R2"]
    p1, p2 = settled
    events.insert(p2 + 1, msgspec.structs.replace(events[p2], id="paid-again"))
    del events[p1]
    page, alerts = page_of(events)
    rules = sorted(a.data.rule for a in alerts)
    assert {"UNSETTLED_BET", "DUPLICATE_SETTLEMENT"} <= set(rules)
    unsettled = next(a for a in alerts if a.data.rule == "UNSETTLED_BET")
    row = page.by_id(f"alert-{unsettled.data.alert_id}").find("tr", data_bet=unsettled.data.bet_id or "")
    assert "never settled" in row.text() and "bad" in row.classes
    twice = next(a for a in alerts if a.data.rule == "DUPLICATE_SETTLEMENT")
    row = page.by_id(f"alert-{twice.data.alert_id}").find("tr", data_bet=twice.data.bet_id or "")
    assert "win +2,000 again: win +2,000" in row.text() and row.find_all("td")[-1].text() == "+2,000"


def test_a_late_bet_is_marked_in_the_bets_history() -> None:
    def build(s: Scenario) -> None:
        round_id = s.open_round()
        s.place(round_id, BetSpec("P1", Spot.BANKER, 1000))
        s.close(round_id)
        s.place(round_id, BetSpec("P2", Spot.PLAYER, 1000, seat="2", bet_id="LATE"))
        s.deal(round_id, PLAYER_DRAWS)

    page, alerts = page_of(table(build))
    [alert] = [a for a in alerts if a.data.rule == "LATE_BET"]
    row = page.by_id(f"alert-{alert.data.alert_id}").find("tr", data_bet="LATE")
    assert "after bets closed" in row.text() and "focus" in row.classes


def test_ids_from_the_log_are_escaped() -> None:
    nasty = 'T<b onmouseover="x">&1'
    page, alerts = page_of(table(lambda s: s.round(PLAYER_DRAWS, declare={"outcome": "banker"}), table=nasty))
    assert alerts
    assert not page.find_all("b")
    assert nasty in page.find("header").text()


def test_a_clean_log_says_so() -> None:
    page, alerts = page_of(table(money_round))
    assert alerts == []
    assert not page.find_all("section")
    assert "No alerts" in page.find("p", cls="clean").text()
    assert "Alerts none" in page.find("header").text()


def test_the_report_is_only_written_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "floor.jsonl"
    log.write_bytes(b"\n".join(lines(table(money_round))) + b"\n")
    runner = CliRunner()
    assert runner.invoke(main, ["replay", str(log)]).exit_code == 0
    assert list(tmp_path.iterdir()) == [log]
    result = runner.invoke(main, ["replay", str(log), "--report", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_first_card_burn_shows_its_count() -> None:
    house = load_profile("sjm")
    s = Scenario(profile="sjm", min_bet=house.min_bet, max_bet=house.max_bet)
    s.start_shoe(burn=["3S", "9D"])  # sjm burns the first card plus its face value: 1 + 3
    s.round(BANKER_NATURAL, [BetSpec("P1", Spot.BANKER, house.min_bet)])
    s.end_shoe()
    page, alerts = page_of(s.log())
    [alert] = alerts
    text = page.by_id(f"alert-{alert.data.alert_id}").find("div", cls="block").text()
    assert "the first card was the 3\u2660, face value 3: 1 + 3. Due 4, burned 2." in text


# ---- fit to hand on: provenance and Macau time --------------------------------------------------


def test_the_provenance_names_the_logs_sha256_the_version_the_profile_and_each_tables_chain_head(floor: Floor) -> None:
    import hashlib
    import importlib.metadata

    block = floor.page.by_id("provenance")
    text = block.text()
    assert hashlib.sha256(floor.log.read_bytes()).hexdigest() in text
    assert f"baccarat-surveil {importlib.metadata.version('baccarat-surveil')}" in text
    assert "house profile dicj" in text
    heads = {row.find("th").text(): row.find("code").text() for row in block.find("table", cls="chain-heads").find_all("tr")}
    last: dict[str, m.AlertRaised] = {}
    for alert in floor.alerts:  # the file holds them in the order raised
        last[alert.data.table_id] = alert
    assert heads == {table: alert.data.chain for table, alert in last.items()}
    assert all(re.fullmatch(r"[0-9a-f]{64}", chain) for chain in heads.values())


def test_times_are_shown_in_macau_beside_utc(floor: Floor) -> None:
    head = floor.page.find("header").text()
    utc = re.search(r"Time span (2026-11-29 (\d\d):(\d\d:\d\d)) UTC", head)
    assert utc is not None
    macau_hour = (int(utc.group(2)) + 8) % 24
    assert f"Macau time 2026-11-{29 + (int(utc.group(2)) + 8) // 24} {macau_hour:02d}:{utc.group(3)} Macau" in head
    for alert in floor.alerts:
        ids = floor.page.by_id(f"alert-{alert.data.alert_id}").find("p", cls="ids").text()
        assert alert.time.strftime("%Y-%m-%d %H:%M:%S UTC") in ids
        assert (alert.time + timedelta(hours=8)).strftime("%Y-%m-%d %H:%M:%S Macau") in ids


def test_a_report_from_a_pipe_says_it_was_not_hashed() -> None:
    page, _ = page_of(table(money_round))
    assert "not computed" in page.by_id("provenance").text()
