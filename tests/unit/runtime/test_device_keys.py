"""Device keys: each device has its own random key, issued by ``surveil keys issue`` into a key
store only the verifiers read; nothing derives one key from another. A signed input carries a
counter under its signature; a verifier takes a record only for the device's own table and only
with a counter above the last it took (the state it commits with its batch)."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from surveil.cli import main
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.events.signing import HEADER, DeviceKeys, Refused
from surveil.runtime.devices import DeviceRecords, KeyStore, verifier_keys
from surveil.runtime.state import MemoryBackend, State

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_surveil_keys_issue_writes_a_random_key_per_device_into_the_store_and_prints_it(tmp_path: Path) -> None:
    store = tmp_path / "keys"
    done = CliRunner().invoke(main, ["keys", "issue", "--store", str(store), "shoe/T07", "console/T07", "shoe/T08"])
    assert done.exit_code == 0, done.output
    printed = dict(line.split() for line in done.stdout.splitlines())
    assert set(printed) == {"shoe/T07", "console/T07", "shoe/T08"}
    assert len(set(printed.values())) == 3 and all(len(key) == 64 for key in printed.values())
    for device, key in printed.items():
        path = KeyStore(store).path(device)
        assert path.read_text().strip() == key
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert CliRunner().invoke(main, ["keys", "list", "--store", str(store)]).stdout.split() == ["console/T07", "shoe/T07", "shoe/T08"]
    refused = CliRunner().invoke(main, ["keys", "issue", "--store", str(store), "dealer/T07"])
    assert refused.exit_code != 0 and "is not a device" in refused.output


def test_a_key_issued_again_replaces_the_old_one_and_the_verifier_takes_it_without_a_restart(tmp_path: Path) -> None:
    store = KeyStore(tmp_path, kinds=("shoe",))
    old = DeviceKeys({"shoe/T07": store.issue("shoe/T07")})
    verifier = DeviceKeys(KeyStore(tmp_path, kinds=("shoe",)))
    assert verifier.problem("shoe/T07", b"line", old.sign("shoe/T07", b"line")) is None
    new = DeviceKeys({"shoe/T07": store.issue("shoe/T07")})
    verifier.keys._checked -= 60  # type: ignore[union-attr]  # the reload interval has passed
    assert verifier.problem("shoe/T07", b"line", new.sign("shoe/T07", b"line")) is None
    assert (
        verifier.problem("shoe/T07", b"line", old.sign("shoe/T07", b"line"))
        == "the signature is not shoe/T07's: a spoofed or altered message"
    )


def test_a_verifier_reads_only_its_own_kind_of_device_keys(tmp_path: Path) -> None:
    issued = KeyStore(tmp_path)
    issued.issue("console/T07")
    issued.issue("shoe/T07")
    shoe_reader = KeyStore(tmp_path, kinds=("shoe",))
    assert shoe_reader.get("shoe/T07") is not None
    assert shoe_reader.get("console/T07") is None
    assert shoe_reader.get("shoe/../console/T07") is None


def test_without_a_key_store_a_verifier_refuses_to_start_unless_told_signatures_are_off(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="DEVICE_KEYS"):
        verifier_keys(["shoe"], {})
    with pytest.raises(SystemExit, match="DEVICE_KEYS"):
        verifier_keys(["shoe"], {"DEVICE_KEYS": str(tmp_path / "missing")})
    with pytest.raises(SystemExit, match="DEVICE_SIGNATURES"):
        verifier_keys(["shoe"], {"DEVICE_SIGNATURES": "no"})
    assert verifier_keys(["shoe"], {"DEVICE_SIGNATURES": "off"}) is None
    assert verifier_keys(["shoe"], {"DEVICE_KEYS": str(tmp_path)}) is not None


# ---- signed records ---------------------------------------------------------------------------------

KEYS = DeviceKeys({"console/T01": bytes(range(32)), "console/T02": bytes(range(1, 33))})


def bet(table: str = "T01", bet_id: str = "B1") -> m.Event:
    data = m.BetPlaceInput(table_id=table, bet_id=bet_id, patron_id="P1", seat="1", spot="banker", amount=1_000)  # type: ignore[arg-type]
    return codec.make(m.BetPlace, data, id=f"{table}:in:{bet_id}", source=f"console/{table}", time=NOW)


def record(
    event: m.Event, key: str | None = None, headers: list[tuple[str, bytes]] | None = None, signer: str | None = None
) -> SimpleNamespace:
    value = codec.encode(event)
    key = key or event.subject
    if headers is None:
        headers = [(HEADER, KEYS.header(f"console/{signer or key}", value))]
    return SimpleNamespace(key=key.encode(), value=value, headers=headers)


def refusal(item: SimpleNamespace, state: State) -> str | None:
    return DeviceRecords(KEYS).refusal(topics.INPUTS, item, codec.decode(item.value), state)


def test_a_signed_input_of_its_own_table_is_taken_once() -> None:
    state = State(MemoryBackend(), "table-controller")
    first = record(bet())
    assert refusal(first, state) is None
    assert refusal(record(bet(bet_id="B2")), state) is None
    reason = refusal(first, state)
    assert reason is not None and reason.startswith("a replayed or out-of-order message: counter")


def test_the_counter_survives_a_commit_and_a_new_state() -> None:
    backend = MemoryBackend()
    state = State(backend, "table-controller")
    first = record(bet())
    assert refusal(first, state) is None
    state.commit()
    assert refusal(first, State(backend, "table-controller")) is not None  # after a restart: still a replay


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (record(bet("T02"), key="T01"), "console/T01 signed an event of table T02: a key signs for its own table only"),
        (record(bet("T02"), key="T02", signer="T01"), "the signature is not console/T02's: a spoofed or altered message"),
        (record(bet(), headers=[]), "no signature: every message of console/T01 must be signed"),
        (record(bet(), headers=[(HEADER, b"12:" + b"0" * 64)]), "the signature is not console/T01's: a spoofed or altered message"),
        (
            record(bet(), headers=[(HEADER, b"\xff\xfe")]),
            "a signature that is not <counter>:<64 hex digits>: every message of console/T01 must be signed",
        ),
        (record(bet(), headers=[(HEADER, None)]), "no signature: every message of console/T01 must be signed"),  # type: ignore[list-item]
        (
            record(bet("T03"), headers=[(HEADER, DeviceKeys({"console/T03": bytes(32)}).header("console/T03", codec.encode(bet("T03"))))]),
            "no key is issued for console/T03: a device of no table this floor knows",
        ),
    ],
)
def test_an_input_its_devices_key_does_not_vouch_for_is_refused(item: SimpleNamespace, reason: str) -> None:
    assert refusal(item, State(MemoryBackend(), "table-controller")) == reason


def test_a_changed_counter_breaks_the_signature() -> None:
    item = record(bet())
    counter, _, mac = item.headers[0][1].partition(b":")
    with pytest.raises(Refused, match="not console/T01's"):
        KEYS.counter("console/T01", item.value, b"%d:%s" % (int(counter) + 1, mac))
