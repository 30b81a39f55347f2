"""Alerts are a proof: each table's alerts chain by hash over envelope and data, each link signed
with the detectors' key, and signed checkpoints count each table's alerts; `surveil verify`,
given only the public key, finds any alert changed, forged, removed, inserted or moved, a tail
cut off a table, a table taken out, and a partition whose checkpoints were cut."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from support.scenario import BetSpec, Scenario, lines
from surveil.analysis.replay import replay
from surveil.analysis.verify import verify
from surveil.cli import main
from surveil.core.money import Spot
from surveil.detect import alerts as alert_module
from surveil.detect.alerts import chain_link, checkpoint, checkpoints
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.alert_keys import AlertSigner, AlertVerifier, generate


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("alert-signing")
    generate(folder)
    return folder


@pytest.fixture(scope="module")
def signer(keys: Path) -> AlertSigner:
    return AlertSigner.from_file(keys / "alert-signing.key")


@pytest.fixture(scope="module")
def verifier(keys: Path) -> AlertVerifier:
    """Only the public key: what an analyst or the regulator holds."""
    return AlertVerifier.from_files([keys / "alert-signing.pub"])


@pytest.fixture(scope="module")
def log(signer: AlertSigner) -> list[m.Event]:
    """Two tables with several alerts each (bets under the minimum in every round of a shoe),
    signed, and the checkpoint that closes the replay."""
    events: list[m.Event] = []
    for table in ("T01", "T02"):
        s = Scenario(table=table)
        s.play_shoe(random.Random(table), lambda coup: [BetSpec("P1", Spot.PLAYER, 300)])
        events += s.log()
    events.sort(key=lambda event: event.time)
    result = replay(iter(lines(events)), signer=signer)
    assert len(result.alerts) > 20 and {a.subject for a in result.alerts} == {"T01", "T02"}
    assert result.checkpoint is not None
    return [*result.alerts, result.checkpoint]


def alerts_of(log: list[m.Event], table: str | None = None) -> list[m.AlertRaised]:
    return [e for e in log if isinstance(e, m.AlertRaised) and table in (None, e.subject)]


def breaks(log: list[m.Event], verifier: AlertVerifier) -> list[tuple[int, str, str]]:
    return [(b.line, b.table_id, b.reason) for b in verify(lines(log), verifier).breaks]


def test_each_alert_links_to_the_previous_one_of_its_table_and_is_signed(log: list[m.Event], verifier: AlertVerifier) -> None:
    previous = ""
    for alert in alerts_of(log, "T01"):
        assert alert.data.chain == chain_link(previous, alert)
        assert verifier.problem(alert.data.chain.encode(), alert.data.signature) is None
        previous = alert.data.chain


def test_an_intact_log_verifies_with_only_the_verification_key(log: list[m.Event], verifier: AlertVerifier) -> None:
    result = verify(lines(log), verifier)
    assert (sum(result.alerts.values()), result.checkpoints, result.unconfirmed, result.breaks) == (len(log) - 1, 1, 0, [])


def test_an_altered_alert_breaks_the_chain_at_its_line(log: list[m.Event], verifier: AlertVerifier) -> None:
    changed = list(log)
    alert = alerts_of(log)[4]
    data = msgspec.structs.replace(alert.data, evidence={**alert.data.evidence, "stake": 1})
    changed[4] = msgspec.structs.replace(alert, data=data)
    assert [line for line, *_ in breaks(changed, verifier)] == [5]


def test_an_altered_envelope_breaks_the_chain(log: list[m.Event], verifier: AlertVerifier) -> None:
    for change in ({"source": "someone-else"}, {"time": log[4].time + timedelta(hours=1)}, {"id": "another-id"}):
        changed = list(log)
        changed[4] = msgspec.structs.replace(log[4], **change)
        assert [line for line, *_ in breaks(changed, verifier)] == [5], change


def test_a_forged_alert_with_a_recomputed_chain_is_refused(log: list[m.Event], verifier: AlertVerifier) -> None:
    """Whoever can write the alerts topic or edit the log can recompute the hash chain, not sign it."""
    t1 = alerts_of(log, "T01")
    last = t1[-1]
    forged = msgspec.structs.replace(last, data=msgspec.structs.replace(last.data, summary="nothing happened"))
    forged = msgspec.structs.replace(forged, data=msgspec.structs.replace(forged.data, chain=chain_link(t1[-2].data.chain or "", forged)))
    changed = [forged if e is last else e for e in log]
    ((line, table, reason), *more) = breaks(changed, verifier)
    assert (line, table, reason) == (
        log.index(last) + 1,
        "T01",
        "the signature does not match: altered, or not signed by the detectors: a chain anyone could have recomputed",
    )
    assert [reason.split(":")[0] for _, _, reason in more] == [f"checkpoint at line {len(log)}"]  # the checkpoint names the real one


def test_a_log_signed_with_another_key_is_refused(log: list[m.Event], tmp_path: Path) -> None:
    generate(tmp_path)
    found = breaks(log, AlertVerifier.from_files([tmp_path / "alert-signing.pub"]))
    assert len(found) == len(log) and all("none of the detectors' keys given" in reason for *_, reason in found)


def test_a_removed_alert_breaks_the_chain_at_the_next_one(log: list[m.Event], verifier: AlertVerifier) -> None:
    t1 = alerts_of(log, "T01")
    removed = [e for e in log if e is not t1[3]]
    # The next alert does not follow, and the checkpoint counts one more than the log has.
    assert [(line, table) for line, table, _ in breaks(removed, verifier)] == [(log.index(t1[4]), "T01"), (len(removed), "T01")]


def test_a_reordered_alert_breaks_the_chain(log: list[m.Event], verifier: AlertVerifier) -> None:
    t1 = alerts_of(log, "T01")
    a, b = log.index(t1[0]), log.index(t1[1])
    moved = list(log)
    moved[a], moved[b] = moved[b], moved[a]
    assert {table for _, table, _ in breaks(moved, verifier)} == {"T01"}
    assert len(breaks(moved, verifier)) >= 2


def test_a_removed_tail_is_reported(log: list[m.Event], verifier: AlertVerifier) -> None:
    cut = [e for e in log if e not in alerts_of(log, "T02")[-3:]]
    count = len(alerts_of(log, "T02"))
    assert breaks(cut, verifier) == [
        (len(cut), "T02", f"tail removed: checkpoint at line {len(cut)} counts {count} alerts, the log has {count - 3}")
    ]


def test_a_removed_table_is_reported(log: list[m.Event], verifier: AlertVerifier) -> None:
    cut = [e for e in log if e not in alerts_of(log, "T01")]
    count = len(alerts_of(log, "T01"))
    assert breaks(cut, verifier) == [
        (len(cut), "T01", f"table removed: checkpoint at line {len(cut)} counts {count} alerts of it, the log has none")
    ]


def test_an_altered_checkpoint_is_refused(log: list[m.Event], verifier: AlertVerifier) -> None:
    closing = log[-1]
    assert isinstance(closing, m.AlertCheckpoint)
    fewer = {table: msgspec.structs.replace(head, count=1) for table, head in closing.data.tables.items()}
    changed = [*log[:-1], msgspec.structs.replace(closing, data=msgspec.structs.replace(closing.data, tables=fewer))]
    assert [reason for *_, reason in breaks(changed, verifier)] == [
        "checkpoint the signature does not match: altered, or not signed by the detectors"
    ]


def test_every_partition_must_have_recent_checkpoints(log: list[m.Event], signer: AlertSigner, verifier: AlertVerifier) -> None:
    alerts = alerts_of(log)
    end = alerts[-1].time
    heads = {t: msgspec.structs.replace(h) for t, h in log[-1].data.tables.items()}  # type: ignore[attr-defined]
    every_partition = [checkpoint(heads if p == 0 else {}, end, signer, p, 3, 60) for p in range(3)]
    assert breaks([*alerts, *every_partition], verifier) == []
    assert [(t, r.split(":")[0]) for _, t, r in breaks([*alerts, every_partition[0], every_partition[2]], verifier)] == [
        ("partition/1", "no checkpoint of this partition")
    ]
    stale = checkpoint({}, end - timedelta(minutes=10), signer, 1, 3, 60)
    found = breaks([*alerts, every_partition[0], stale, every_partition[2]], verifier)
    assert [(t, r.split(",")[1].strip()) for _, t, r in found] == [("partition/1", "before the others': its tail may have been removed")]


@pytest.mark.parametrize("character", ["x", "\x01", "\ufffd"])  # JSON: 1, 6 (\u0001) and 3 (UTF-8) bytes
def test_a_partition_of_more_tables_than_a_record_holds_has_several_checkpoints_of_one_time(
    log: list[m.Event], signer: AlertSigner, character: str
) -> None:
    # A flood of spoofed device messages, each claiming a table of its own (any characters, up to
    # 256), makes a table of each.
    flood = {f"{n:05d}".ljust(256, character): m.ChainHead(1, "0" * 64) for n in range(4500)}
    assert not topics.fits(b"partition/2", codec.encode(checkpoint(flood, log[-1].time, signer, 2, 6, 60)))
    made = checkpoints(flood, log[-1].time, signer, 2, 6, 60)
    assert len(made) > 1 and all(topics.fits(c.subject.encode(), codec.encode(c)) for c in made)
    assert [c.id.rpartition("/")[2] for c in made] == [f"{n}of{len(made)}" for n in range(1, len(made) + 1)]
    assert sum(len(c.data.tables) for c in made) == len(flood) and {t for c in made for t in c.data.tables} == set(flood)


def test_a_checkpoint_in_parts_verifies_with_every_part_and_breaks_without_one(
    log: list[m.Event], signer: AlertSigner, verifier: AlertVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alert_module, "CHECKPOINT_TABLE_BYTES", 1)  # a table a part: the log's two tables, two parts
    parts = checkpoints(dict(log[-1].data.tables), log[-1].time, signer)  # type: ignore[attr-defined]
    assert len(parts) == 2
    result = verify(lines([*alerts_of(log), *parts]), verifier)
    assert (result.checkpoints, result.breaks) == (2, [])
    # Part 2 taken out with its table's alerts: the chains of what is left all hold.
    kept = [a for a in alerts_of(log) if a.subject not in parts[1].data.tables]
    (found,) = breaks([*kept, parts[0]], verifier)
    assert found[2].startswith("checkpoint in 2 parts, part 2 missing")


def test_alerts_after_the_last_checkpoint_are_counted_as_unconfirmed(log: list[m.Event], verifier: AlertVerifier) -> None:
    result = verify(lines(alerts_of(log)), verifier)
    assert (result.checkpoints, result.unconfirmed, result.breaks) == (0, len(alerts_of(log)), [])


def test_a_republished_alert_is_a_repeat_not_a_break(log: list[m.Event], verifier: AlertVerifier) -> None:
    repeated = log[:5] + [log[4]] + log[5:]
    result = verify(lines(repeated), verifier)
    assert (result.repeats, result.breaks) == (1, [])


def test_an_alert_without_chain_or_garbage_is_reported(log: list[m.Event], verifier: AlertVerifier) -> None:
    first = alerts_of(log)[0]
    unchained = msgspec.structs.replace(first, data=msgspec.structs.replace(first.data, chain=None))
    result = verify([codec.encode(unchained), b"not json"], verifier)
    assert [(b.line, b.reason.split(":")[0]) for b in result.breaks] == [(1, "no chain value"), (2, "not an event")]


def test_surveil_verify_needs_only_the_public_key(log: list[m.Event], keys: Path, tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines(log)))
    done = CliRunner().invoke(main, ["verify", str(path), "--key", str(keys / "alert-signing.pub")])
    assert done.exit_code == 0, done.output
    assert "0 breaks" in done.output and "1 checkpoints" in done.output
    path.write_bytes(b"".join(line + b"\n" for line in lines(log[:3] + log[4:])))
    done = CliRunner().invoke(main, ["verify", str(path), "--key", str(keys / "alert-signing.pub")])
    assert done.exit_code == 1 and "breaks" in done.output
    assert CliRunner().invoke(main, ["verify", str(path)]).exit_code != 0  # no key: nothing to prove with
