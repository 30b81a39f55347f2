"""The /metrics endpoint every service serves: the default registry, then the per-table families
written out by hand (``TableFamily``), in Prometheus' text format."""

from __future__ import annotations

import gc
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from surveil.anomaly_detection.metrics import ROUND_OUTCOMES, TABLE_ALERTS, TABLE_LAST_EVENT, TABLE_SHOE_IN_PLAY
from surveil.runtime.metrics import EVENTS_CONSUMED, serve


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = serve(0, "127.0.0.1")
    yield server.server_address[1]
    server.shutdown()


def scrape(port: int) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        content_type, text = response.headers["Content-Type"], response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return content_type, samples


def test_the_per_table_series_are_served_beside_the_registry_and_read_back_as_set(port: int) -> None:
    table = f"T-{uuid.uuid4().hex[:6]}"  # this test's own: the families are the process'
    EVENTS_CONSUMED.labels("anomaly-detection", "baccarat.shoe").inc()
    ROUND_OUTCOMES.touch(table, "D1", "tie")
    ROUND_OUTCOMES.inc(table, "D1", "banker")
    ROUND_OUTCOMES.inc(table, "D1", "banker", amount=2)
    TABLE_SHOE_IN_PLAY.set(table, value=1)
    TABLE_LAST_EVENT.set(table, value=1764662400.25)
    content_type, samples = scrape(port)
    assert content_type.startswith("text/plain; version=0.0.4")
    assert samples[("surveil_events_consumed_total", (("service", "anomaly-detection"), ("topic", "baccarat.shoe")))] >= 1
    outcomes = (("dealer", "D1"), ("outcome", "banker"), ("table", table))
    assert samples[("surveil_round_outcomes_total", outcomes)] == 3
    assert samples[("surveil_round_outcomes_total", (("dealer", "D1"), ("outcome", "tie"), ("table", table)))] == 0
    assert samples[("surveil_table_shoe_in_play", (("table", table),))] == 1
    assert samples[("surveil_table_last_event_timestamp_seconds", (("table", table),))] == 1764662400.25
    TABLE_SHOE_IN_PLAY.set(table, value=0)
    assert scrape(port)[1][("surveil_table_shoe_in_play", (("table", table),))] == 0


def test_label_values_are_escaped_so_that_any_id_reads_back_as_itself(port: int) -> None:
    table = f'T"{uuid.uuid4().hex[:6]}\\\n,x="y"}}'  # a quote, a backslash, a line end, a brace: ids come from events
    TABLE_ALERTS.inc(table, "CARD_MISMATCH", "critical")
    _, samples = scrape(port)
    assert samples[("surveil_table_alerts_total", (("rule", "CARD_MISMATCH"), ("severity", "critical"), ("table", table)))] == 1


def test_each_family_is_declared_once_with_its_type(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    for name, kind in (("surveil_round_outcomes_total", "counter"), ("surveil_table_last_event_timestamp_seconds", "gauge")):
        assert text.count(f"# TYPE {name} {kind}\n") == 1


def test_each_collection_of_the_process_is_timed_by_generation_once_it_serves(port: int) -> None:
    full = (("generation", "2"),)
    gc.disable()  # only the collections made here
    try:
        before = scrape(port)[1][("surveil_gc_pause_seconds_count", full)]
        gc.collect()
        gc.collect(0)
        _, samples = scrape(port)
        assert samples[("surveil_gc_pause_seconds_count", full)] == before + 1
        assert samples[("surveil_gc_pause_seconds_count", (("generation", "0"),))] >= 1
        assert samples[("surveil_gc_pause_seconds_sum", full)] > 0
        second = serve(0, "127.0.0.1")  # a second endpoint does not time each collection twice
        second.shutdown()
        second.server_close()
        gc.collect()
        assert scrape(port)[1][("surveil_gc_pause_seconds_count", full)] == before + 2
    finally:
        gc.enable()
