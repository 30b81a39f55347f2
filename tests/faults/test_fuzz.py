"""Every consumer fed malformed input (``faults.fuzzing``): a few hundred hypothesis examples per
consumer here; ``bench/fuzz.py`` runs 100,000 cases and more. A failing example is shrunk by
hypothesis and reported with what went wrong (a crash, a refusal without its dead letter, a
refusal that changed something, an invalid output)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from faults import fuzzing

pytestmark = pytest.mark.faults

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
CONSUMERS = list(fuzzing.consumers())


@pytest.mark.parametrize("name", CONSUMERS)
def test_no_malformed_input_crashes_a_consumer_or_escapes_the_dead_letters(name: str) -> None:
    consumer = fuzzing.consumers()[name]
    verdict = fuzzing.Verdict(name)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(consumer.strategy())
    def one(case: Any) -> None:
        fuzzing.check(consumer, case, verdict, strict=True)

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
