"""``surveil simulate``: the recorded log and its labels, gzipped or not, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from surveil.analysis.replay import open_log, replay
from surveil.cli import main
from surveil.events import codec


def simulate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["simulate", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", ["floor.jsonl", "floor.jsonl.gz"])
def test_the_log_and_its_labels_are_written(tmp_path: Path, name: str) -> None:
    log = tmp_path / name
    code, output = simulate("--tables", "2", "--shoes", "1", "--seed", "4", "--inject", "late_bet,CARD_EXPOSED", "--out", str(log))
    assert code == 0, output
    raw = log.read_bytes()
    assert raw[:2] == b"\x1f\x8b" if name.endswith(".gz") else raw[:1] == b"{"
    with open_log(log) as lines:
        events = [codec.decode(line) for line in lines]
    assert {e.topic for e in events} == {"baccarat.shoe", "baccarat.table", "baccarat.settlement"}
    labels = [json.loads(line) for line in (tmp_path / "floor.labels.jsonl").read_text().splitlines()]
    assert sorted(label["code"] for label in labels) == ["CARD_EXPOSED", "LATE_BET"]
    assert f"-> {log}" in output.replace("\n", "")
    with open_log(log) as lines:
        alerts = replay(lines).alerts
    assert sorted(a.data.rule for a in alerts) == ["CARD_EXPOSED", "LATE_BET"]


def test_the_same_seed_writes_the_same_log(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        assert simulate("--tables", "1", "--shoes", "1", "--seed", "9", "--out", str(tmp_path / name))[0] == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--inject", "LATE"], "unknown alert code 'LATE'; injectable: DRAW_PLAYER_MISSING"),
        (["--inject", "TIE_BET_MOVED"], "TIE_BET_MOVED: the dicj profile allows that after a tie"),
        (["--inject", "UNSETTLED_BET", "--live"], "settlement injections change the settlement service's output: offline only"),
        ([], "--out is required"),
    ],
)
def test_what_cannot_be_done_is_refused(args: list[str], message: str) -> None:
    code, output = simulate("--tables", "1", "--shoes", "1", *args)
    assert code == 2
    assert message in " ".join(output.split())


def test_an_injection_that_found_no_room_fails_the_run(tmp_path: Path) -> None:
    code, output = simulate(
        "--tables", "1", "--shoes", "1", "--inject", "OUTCOME_DRIFT,SHOE_REPEAT", "--profile", "sjm", "--out", str(tmp_path / "x.jsonl")
    )
    assert code == 2 and "SHOE_REPEAT repeats an earlier shoe" in output
    code, output = simulate(
        "--tables", "1", "--shoes", "2", "--inject", "OUTCOME_DRIFT,SHOE_REPEAT,BURN_COUNT", "--out", str(tmp_path / "x.jsonl")
    )
    assert code == 1
    assert "not injected" in output and "BURN_COUNT at T001" in output
