"""Every consumer fed malformed input (``faults.fuzzing``): a few hundred hypothesis examples per
consumer here; ``bench/fuzz.py`` runs 100,000 cases and more. A failing example is shrunk by
hypothesis and reported with what went wrong (a crash, a refusal without its dead letter, a
refusal that changed something, an invalid output)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings

from faults import fuzzing, record_fuzzing
from support import seeds
from surveil.events import codec, topics

pytestmark = pytest.mark.faults

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
SEED = seeds.seed("FUZZ_SEED")
CONSUMERS = list(fuzzing.consumers())


@pytest.fixture(scope="module", autouse=True)
def _say_the_seed(pytestconfig: pytest.Config) -> None:
    seeds.announce(pytestconfig, "fuzzing", "FUZZ_SEED", SEED)


@pytest.mark.parametrize("name", CONSUMERS)
def test_no_malformed_input_crashes_a_consumer_or_escapes_the_dead_letters(name: str) -> None:
    consumer = fuzzing.consumers()[name]
    verdict = fuzzing.Verdict(name)

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(consumer.strategy())
    def one(case: Any) -> None:
        try:
            fuzzing.check(consumer, case, verdict, strict=True)
        except fuzzing.Failure as failure:
            raise fuzzing.Failure(f"{failure} (FUZZ_SEED={SEED} reproduces the run)") from None

    with fuzzing.quiet():
        one()
    assert verdict.cases >= EXAMPLES
    assert verdict.rejected > 0, "no fuzzed input was refused: the cases are not malformed enough"


def test_the_harness_catches_a_consumer_that_swallows_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: settlement refusing events without a dead letter is reported."""
    consumer = fuzzing.consumers()["settlement/baccarat.table"]
    monkeypatch.setattr(fuzzing.InProcessBus, "dead_letters", property(lambda self: [], lambda self, value: None), raising=False)
    verdict = fuzzing.fuzz(consumer, 300, seed=1)
    assert verdict.violations > 0


def test_records_with_ids_of_hundreds_of_kb_cannot_make_the_detectors_state_unwritable() -> None:
    """Two bets whose patron ids were 600 KB each made the detectors' table value 1.2 MB, over
    the broker's maximum: the worker could not write its state at any commit again. The contract
    now bounds every id (``events.models.Id``), and such events are dead letters."""
    app = record_fuzzing.AppConsumer()
    bet = [e for e in fuzzing.material().recorded if e.event_type == "baccarat.bet.placed"][5]
    records = []
    for n in range(2):
        obj = json.loads(codec.encode(bet))
        obj["id"] += f"/{n}"
        obj["data"]["bet_id"] += f"/{n}"
        obj["data"]["patron_id"] = "P" * 600_000
        records.append((fuzzing.WINDOW, record_fuzzing.Record(topics.TABLE, bet.subject.encode(), json.dumps(obj).encode(), ())))
    status, problem = app.run(record_fuzzing.RecordCase(app.base.index(bet) // fuzzing.STEP, tuple(records)))
    assert problem is None
    assert status == ["rejected", "rejected"]
