"""The surveillance room's Grafana dashboards, as code: writes ops/grafana/dashboards/*.json.

    .venv/bin/python ops/grafana/generate.py           # write the JSON files
    .venv/bin/python ops/grafana/generate.py --check   # exit 1 if a file differs from what this makes

The JSON is committed (Grafana provisions it from files, see provisioning/dashboards) and
tests/unit/ops/test_dashboards.py fails when it is not what this script makes. Edit here, run,
commit both. Every panel has a description saying what question it answers; docs/monitoring.md
explains the dashboards panel by panel.

The queries read the services' metrics and the recording rules of ops/prometheus/rules; the
exact outcome probabilities come from the rules core (``surveil.core.odds``), not from here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surveil.core.money import Spot
from surveil.core.odds import house_edge, tabled_outcome_counts
from surveil.core.play import Outcome

HERE = Path(__file__).resolve().parent
OUT = HERE / "dashboards"

DATASOURCE = {"type": "prometheus", "uid": "surveil-prometheus"}  # provisioning/datasources
SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection", "lag-exporter")
SERVICE_JOBS = f'job=~"{"|".join(SERVICES)}"'
DECKS = 8  # the shoe the exact probabilities are for (Macau tables deal 8 decks)
LAG_THRESHOLD = 1000  # messages: SurveilConsumerLagHigh
SILENT_AFTER = 300  # seconds: SurveilTableSilent

Json = dict[str, Any]


def edge(spot: Spot, decks: int = DECKS) -> str:
    """The house edge of a bet on ``spot``, as a percentage: ``"1.06 %"``."""
    return f"{float(house_edge(spot, decks)) * 100:.2f} %"


def win_share(outcome: str) -> str:
    """The share of decided (not tied) rounds ``outcome`` wins, as a percentage."""
    p = exact_probabilities()
    return f"{p[outcome] / (p['banker'] + p['player']) * 100:.1f} %"


def exact_probabilities(decks: int = DECKS) -> dict[str, float]:
    """``{"banker": 0.458597, ...}`` for a full shoe of ``decks`` decks, rounded to 6 places."""
    counts = tabled_outcome_counts(decks)
    return {outcome.value: round(float(counts.probability(outcome)), 6) for outcome in (Outcome.BANKER, Outcome.PLAYER, Outcome.TIE)}


# ---- panels -------------------------------------------------------------------------------------


@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False  # format as a table (one row per series)


@dataclass
class Panel:
    kind: str  # timeseries, stat, bargauge, table, row
    title: str
    description: str
    queries: Sequence[Query]
    width: int = 12
    height: int = 8
    unit: str = "short"
    decimals: int | None = None
    thresholds: Sequence[tuple[str, float | None]] = (("green", None),)
    mappings: Sequence[Json] = ()
    options: Json = field(default_factory=dict)
    custom: Json = field(default_factory=dict)
    links: Sequence[Json] = ()
    transformations: Sequence[Json] = ()
    min: float | None = None
    max: float | None = None


def row(title: str) -> Panel:
    return Panel("row", title, "", (), width=24, height=1)


def timeseries(title: str, description: str, *queries: Query, **kw: Any) -> Panel:
    kw.setdefault(
        "options",
        {
            "legend": {"displayMode": "table", "placement": "right", "showLegend": True, "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    )
    kw.setdefault("custom", {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": False})
    return Panel("timeseries", title, description, queries, **kw)


def stat(title: str, description: str, *queries: Query, **kw: Any) -> Panel:
    kw.setdefault("width", 4)
    kw.setdefault("height", 4)
    kw.setdefault(
        "options",
        {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "textMode": "auto",
        },
    )
    return Panel("stat", title, description, [Query(q.expr, q.legend, instant=True) for q in queries], **kw)


def bars(title: str, description: str, *queries: Query, **kw: Any) -> Panel:
    """Horizontal bars, one per series, of the value now (instant queries)."""
    kw.setdefault(
        "options",
        {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "displayMode": "basic",
            "orientation": "horizontal",
            "showUnfilled": True,
            "valueMode": "color",
            "namePlacement": "left",
            "sizing": "auto",
            "minVizHeight": 16,
            "minVizWidth": 8,
            "maxVizHeight": 300,
        },
    )
    return Panel("bargauge", title, description, [Query(q.expr, q.legend, instant=True) for q in queries], **kw)


def table(title: str, description: str, *queries: Query, hide: Iterable[str] = ("Time",), **kw: Any) -> Panel:
    kw.setdefault("options", {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"], "fields": ""}})
    kw.setdefault(
        "transformations",
        [
            *([{"id": "merge", "options": {}}] if len(queries) > 1 else []),
            {"id": "organize", "options": {"excludeByName": {name: True for name in hide}}},
        ],
    )
    return Panel("table", title, description, [Query(q.expr, q.legend, instant=True, table=True) for q in queries], **kw)


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> Json:
    grid = {"h": panel.height, "w": panel.width, "x": x, "y": y}
    if panel.kind == "row":
        return {"type": "row", "id": panel_id, "title": panel.title, "collapsed": False, "gridPos": grid, "panels": []}
    defaults: Json = {
        "unit": panel.unit,
        "thresholds": {"mode": "absolute", "steps": [{"color": color, "value": value} for color, value in panel.thresholds]},
        "mappings": list(panel.mappings),
        "color": {"mode": "palette-classic" if panel.kind == "timeseries" else "thresholds"},
        "links": list(panel.links),
    }
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.min is not None:
        defaults["min"] = panel.min
    if panel.max is not None:
        defaults["max"] = panel.max
    if panel.custom:
        defaults["custom"] = panel.custom
    targets = []
    for ref, query in zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", panel.queries):
        target: Json = {
            "refId": ref,
            "datasource": DATASOURCE,
            "expr": query.expr,
            "legendFormat": query.legend or "__auto",
            "instant": query.instant,
            "range": not query.instant,
            "editorMode": "code",
        }
        if query.table:
            target["format"] = "table"
        targets.append(target)
    body: Json = {
        "type": panel.kind,
        "id": panel_id,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": grid,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": panel.options,
    }
    if panel.transformations:
        body["transformations"] = list(panel.transformations)
    return body


def layout(panels: Iterable[Panel]) -> list[Json]:
    """Left to right, top to bottom, on Grafana's 24-column grid; a row starts a new line."""
    placed: list[Json] = []
    x = y = line_height = 0
    for panel_id, panel in enumerate(panels, start=1):
        if panel.kind == "row" or x + panel.width > 24:
            x, y, line_height = 0, y + line_height, 0
        placed.append(panel_json(panel, panel_id, x, y))
        if panel.kind == "row":
            y += 1
        else:
            x += panel.width
            line_height = max(line_height, panel.height)
    return placed


def variable(name: str, label: str, metric: str, description: str) -> Json:
    query = f"label_values({metric}, {name})"
    return {
        "name": name,
        "label": label,
        "description": description,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values", "qryType": 1},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "multi": False,
        "includeAll": False,
        "current": {},
        "options": [],
        "hide": 0,
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: Iterable[Panel],
    variables: Sequence[Json] = (),
    refresh: str = "10s",
    time_from: str = "now-6h",
) -> Json:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["surveil"],
        "timezone": "browser",
        "editable": False,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": refresh,
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "type": "dashboards",
                "tags": ["surveil"],
                "title": "Surveillance",
                "asDropdown": False,
                "includeVars": False,
                "keepTime": True,
                "icon": "external link",
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            }
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": list(variables)},
        "panels": layout(panels),
    }


# Colour steps and value mappings used more than once.
ALARM_AT_1 = (("green", None), ("red", 1))
UP_DOWN = [{"type": "value", "options": {"0": {"text": "down", "color": "red"}, "1": {"text": "up", "color": "green"}}}]
# A stat panel showing each series as its own coloured light, named (one per service).
PER_SERIES_LIGHTS = {
    "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
    "colorMode": "background",
    "graphMode": "none",
    "justifyMode": "center",
    "orientation": "vertical",
    "textMode": "value_and_name",
}
SIGNATURES_CHECKED = [
    {"type": "value", "options": {"0": {"text": "OFF: devices unchecked", "color": "red"}, "1": {"text": "checked", "color": "green"}}}
]
IN_PLAY = [{"type": "value", "options": {"0": {"text": "no shoe", "color": "blue"}, "1": {"text": "in play", "color": "green"}}}]
TABLE_LINK = [
    {
        "title": "Table ${__field.labels.table}",
        "url": "/d/surveil-table/table-drill-down?var-table=${__field.labels.table}&${__url_time_range}",
    }
]


# ---- the floor overview ------------------------------------------------------------------------


def floor_overview() -> Json:
    house = (
        "sum by (table) (increase(surveil_settlement_staked_total[$__range]))"
        " - sum by (table) (increase(surveil_settlement_paid_out_total[$__range]))"
    )
    panels = [
        row("The floor now"),
        stat(
            "Tables in play",
            "How many tables are dealing a shoe now (their shoe started and has not ended).",
            Query("count(table:surveil_table_shoe_in_play:latest == 1) or vector(0)"),
        ),
        stat(
            "Rounds in the last hour",
            "How many rounds the whole floor completed in the last hour (demonstration rounds left out).",
            Query("sum(table:surveil_round_outcomes:increase1h) or vector(0)"),
            decimals=0,
        ),
        stat(
            "Critical alerts",
            "How many critical findings the detectors raised in the dashboard's time range.",
            Query('sum(increase(surveil_alerts_total{severity="critical"}[$__range])) or vector(0)'),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        stat(
            "Silent tables",
            f"How many tables have a shoe in play but sent nothing for over {SILENT_AFTER // 60} minutes (alert SurveilTableSilent firing).",
            Query('count(ALERTS{alertname="SurveilTableSilent", alertstate="firing"}) or vector(0)'),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        stat(
            "House result",
            "Staked minus paid out over the dashboard's time range, the whole floor, in currency units (positive: the house won).",
            Query("sum(increase(surveil_settlement_staked_total[$__range])) - sum(increase(surveil_settlement_paid_out_total[$__range]))"),
            decimals=0,
            thresholds=(("red", None), ("green", 0)),
        ),
        stat(
            "Pipeline alerts firing",
            "How many of the platform's alerts fire now (a service down, lag, dead letters): the floor may not be fully watched.",
            Query('count(ALERTS{team="platform", alertstate="firing"}) or vector(0)'),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        row("Tables"),
        timeseries(
            "Rounds per hour by table",
            "Each table's pace: rounds completed per hour, over the last 5 minutes. A table deals 60 to 80 an hour; a flat line at 0 is a table that stopped.",
            Query("table:surveil_round_outcomes:rate5m * 3600", "{{table}}"),
            links=TABLE_LINK,
        ),
        bars(
            "Seconds since each table's last event",
            f"Which tables are going quiet: seconds since anomaly-detection last heard a card, bet or round event of each table. Red past {SILENT_AFTER} s.",
            Query("sort_desc(time() - table:surveil_table_last_event_timestamp_seconds:max)", "{{table}}"),
            unit="s",
            decimals=0,
            thresholds=(("green", None), ("orange", 120), ("red", SILENT_AFTER)),
            links=TABLE_LINK,
        ),
        bars(
            "House result by table",
            "Which tables won or lost the house money over the dashboard's time range: staked minus paid out, in currency units.",
            Query(f"sort_desc({house})", "{{table}}"),
            decimals=0,
            thresholds=(("red", None), ("green", 0)),
            links=TABLE_LINK,
        ),
        bars(
            "Hold by table",
            "The house's share of what was staked at each table over the time range (house result / staked). "
            f"The house edge is {edge(Spot.BANKER)} of a Banker stake, {edge(Spot.PLAYER)} of a Player stake and {edge(Spot.TIE)} of a Tie stake "
            f"({DECKS} decks); a hold far from that mix over many rounds deserves a look.",
            Query(f"sort_desc(({house}) / sum by (table) (increase(surveil_settlement_staked_total[$__range])))", "{{table}}"),
            unit="percentunit",
            decimals=1,
            thresholds=(("red", None), ("green", 0)),
            links=TABLE_LINK,
        ),
        timeseries(
            "House result by table, rolling hour",
            "How each table's result moves: staked minus paid out over the hour before each point, in currency units.",
            Query("table:surveil_settlement_house_result:increase1h", "{{table}}"),
            links=TABLE_LINK,
        ),
        row("Alerts"),
        bars(
            "Alerts by rule",
            "Which rules fired in the dashboard's time range, and how often.",
            Query("sort_desc(sum by (rule) (increase(surveil_alerts_total[$__range])) > 0)", "{{rule}}"),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        timeseries(
            "Alert rate by rule",
            "When the alerts came: alerts per hour by rule, over the last 5 minutes.",
            Query("sum by (rule) (rule_severity:surveil_alerts:rate5m) * 3600 > 0", "{{rule}}"),
        ),
        bars(
            "Voided rounds",
            "Rounds voided in the time range (ROUND_VOIDED), by grade: critical, a void no misdeal called for (a card exposed "
            "face up is none: Art. 4 keeps the round valid), whose returned stakes the rules had in play; warning, a void "
            "after a misdeal the detectors found (Art. 10).",
            Query('sum by (severity) (increase(surveil_alerts_total{rule="ROUND_VOIDED"}[$__range]))', "{{severity}}"),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        bars(
            "Alerts by table",
            "Which tables the alerts of the time range were raised at.",
            Query("sort_desc(sum by (table) (increase(surveil_table_alerts_total[$__range])) > 0)", "{{table}}"),
            decimals=0,
            thresholds=ALARM_AT_1,
            links=TABLE_LINK,
        ),
        table(
            "Alerts firing now",
            "Every Prometheus alert firing now (critical findings, silent tables, the pipeline's), with its labels.",
            Query('ALERTS{alertstate="firing"}'),
            hide=("Time", "Value", "__name__", "alertstate"),
            width=12,
        ),
    ]
    return dashboard(
        "surveil-floor",
        "Surveillance: floor overview",
        "The whole floor at a glance: tables in play, their pace, the house result and the alerts.",
        panels,
    )


# ---- a table ------------------------------------------------------------------------------------


def table_drill_down() -> Json:
    t = 'table="$table"'
    rounds = f"sum(increase(surveil_round_outcomes_total{{{t}}}[$__range]))"
    exact = exact_probabilities()
    share_queries = []
    deviation_queries = []
    for outcome, p in exact.items():
        seen = f'sum(increase(surveil_round_outcomes_total{{{t}, outcome="{outcome}"}}[$__range]))'
        share_queries.append(Query(f"{seen} / {rounds}", f"{outcome} seen"))
        share_queries.append(Query(f'label_replace(vector({p}), "outcome", "{outcome}", "", "")', f"{outcome} exact ({DECKS} decks)"))
        deviation_queries.append(Query(f"({seen} - {p} * {rounds}) / sqrt({p * (1 - p):.6f} * {rounds})", outcome))
    money = {
        "Staked": f"sum(increase(surveil_settlement_staked_total{{{t}}}[$__range]))",
        "Paid out": f"sum(increase(surveil_settlement_paid_out_total{{{t}}}[$__range]))",
        "Commission": f"sum(increase(surveil_settlement_commission_total{{{t}}}[$__range]))",
    }
    panels = [
        row("The table now"),
        stat("Shoe", "Is a shoe in play at this table now?", Query(f"table:surveil_table_shoe_in_play:latest{{{t}}}"), mappings=IN_PLAY),
        stat(
            "Since the last event",
            f"Seconds since anomaly-detection last heard a card, bet or round event of this table. Red past {SILENT_AFTER} s with a shoe in play: the table stopped.",
            Query(f"time() - table:surveil_table_last_event_timestamp_seconds:max{{{t}}}"),
            unit="s",
            decimals=0,
            thresholds=(("green", None), ("orange", 120), ("red", SILENT_AFTER)),
        ),
        stat(
            "Dealer",
            "Who deals now: the dealer of the most rounds at this table in the last 10 minutes.",
            Query(f"topk(1, sum by (dealer) (increase(surveil_round_outcomes_total{{{t}}}[10m])))", "{{dealer}}"),
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "none",
                "graphMode": "none",
                "justifyMode": "auto",
                "orientation": "auto",
                "textMode": "name",
            },
        ),
        stat(
            "Rounds in the last hour",
            "The table's pace: rounds completed in the last hour.",
            Query(f"table:surveil_round_outcomes:increase1h{{{t}}}"),
            decimals=0,
        ),
        stat("Rounds in the time range", "How many rounds the outcome figures below rest on.", Query(rounds), decimals=0),
        stat(
            "Alerts in the time range",
            "How many alerts the detectors raised at this table in the time range.",
            Query(f"sum(increase(surveil_table_alerts_total{{{t}}}[$__range])) or vector(0)"),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        row("Outcomes against the exact probabilities"),
        bars(
            "Outcome shares",
            f"Does the table's play look like a fair shoe? Each outcome's share of the rounds in the time range next to its exact probability for {DECKS} decks (surveil.core.odds). Over a few dozen rounds shares stray widely; see the deviation beside it.",
            *share_queries,
            unit="percentunit",
            decimals=2,
            min=0,
            max=0.6,
            width=12,
            height=9,
        ),
        stat(
            "Deviation from the exact probabilities",
            "How far each outcome's count is from what a fair shoe gives, in standard errors ((seen - p n) / sqrt(p (1 - p) n)). Within ±2 is ordinary; past ±3 is what the OUTCOME_DRIFT detector looks into.",
            *deviation_queries,
            decimals=1,
            width=12,
            height=9,
            thresholds=(("red", None), ("orange", -3), ("green", -2), ("orange", 2), ("red", 3)),
        ),
        timeseries(
            "Rounds per hour by dealer",
            "Who dealt when, and at what pace: rounds per hour by dealer, over the last 5 minutes.",
            Query(f"sum by (dealer) (rate(surveil_round_outcomes_total{{{t}}}[5m])) * 3600 > 0", "{{dealer}}"),
        ),
        table(
            "Outcomes by dealer",
            "Each dealer's rounds at this table in the time range, by outcome.",
            Query(f"sum by (dealer, outcome) (increase(surveil_round_outcomes_total{{{t}}}[$__range])) > 0"),
            hide=("Time",),
        ),
        row("Money"),
        *[
            stat(name, f"{name} at this table in the time range, in currency units.", Query(expr), decimals=0, height=8)
            for name, expr in money.items()
        ],
        stat(
            "House result",
            "Staked minus paid out at this table in the time range, in currency units (positive: the house won).",
            Query(f"{money['Staked']} - {money['Paid out']}"),
            decimals=0,
            height=8,
            thresholds=(("red", None), ("green", 0)),
        ),
        timeseries(
            "House result, rolling hour",
            "How the table's result moves: staked minus paid out over the hour before each point.",
            Query(f"table:surveil_settlement_house_result:increase1h{{{t}}}", "house result"),
            width=8,
        ),
        row("Alerts"),
        bars(
            "Alerts by rule at this table",
            "Which rules fired at this table in the time range.",
            Query(f"sort_desc(sum by (rule) (increase(surveil_table_alerts_total{{{t}}}[$__range])) > 0)", "{{rule}}"),
            decimals=0,
            thresholds=ALARM_AT_1,
        ),
        table(
            "Alerts firing for this table",
            "Prometheus alerts about this table firing now (a silent table).",
            Query(f'ALERTS{{alertstate="firing", {t}}}'),
            hide=("Time", "Value", "__name__", "alertstate"),
        ),
    ]
    return dashboard(
        "surveil-table",
        "Surveillance: table drill-down",
        "One table: is it dealing, who deals, do its outcomes look like a fair shoe, its money and its alerts.",
        panels,
        [variable("table", "Table", "surveil_round_outcomes_total", "The table to look at.")],
    )


# ---- the pipeline -------------------------------------------------------------------------------


def pipeline_health() -> Json:
    def quantile_queries(metric: str, level: str = "job", legend: str = "") -> list[Query]:
        label = level.rpartition("_")[2]  # the label beside the job's, if any: job_topic's topic
        by = f" {{{{{label}}}}}" if label != "job" else ""
        return [Query(f"{level}:{metric}:{q}_5m", f"{q}{by}{legend}") for q in ("p50", "p99")]

    def quantiles(title: str, description: str, metric: str, level: str = "job") -> Panel:
        return timeseries(title, description, *quantile_queries(metric, level), unit="s", width=6)

    panels = [
        row("Services"),
        stat(
            "Up",
            "Does each service answer its /metrics? (SurveilServiceDown pages after a minute down.)",
            Query(f"up{{{SERVICE_JOBS}}}", "{{job}}"),
            mappings=UP_DOWN,
            thresholds=(("red", None), ("green", 1)),
            width=8,
            options=PER_SERIES_LIGHTS,
        ),
        stat(
            "Device signatures",
            'Do the shoe-reader and the table-controller check their devices\' signatures? Red: started with DEVICE_SIGNATURES=off, so any shoe line or bet is taken, forged or not (docs/security.md, "Device signatures").',
            Query("min by (service) (surveil_device_signatures_enforced)", "{{service}}"),
            mappings=SIGNATURES_CHECKED,
            thresholds=(("red", None), ("green", 1)),
            width=4,
            options=PER_SERIES_LIGHTS,
        ),
        table(
            "Platform alerts firing",
            "The pipeline's alerts firing now: a service down, consumer lag, unknown lag, dead letters.",
            Query('ALERTS{alertstate="firing", team="platform"}'),
            hide=("Time", "Value", "__name__", "alertstate", "team"),
        ),
        timeseries(
            "Events consumed per second",
            "How much each service takes from its topics (over the last 5 minutes).",
            Query("service:surveil_events_consumed:rate5m", "{{service}}"),
            unit="ops",
            width=8,
        ),
        timeseries(
            "Events produced per second",
            "How much each service publishes (over the last 5 minutes).",
            Query("service:surveil_events_produced:rate5m", "{{service}}"),
            unit="ops",
            width=8,
        ),
        timeseries(
            "Rounds checked and settled per second",
            "Do detection and settlement keep up with each other? Rounds replayed against the rules by anomaly-detection next to rounds settled.",
            Query('sum(rate(surveil_rounds_checked_total{job="anomaly-detection"}[5m]))', "checked (anomaly-detection)"),
            Query('sum(rate(surveil_settlement_rounds_total{job="settlement"}[5m]))', "settled (settlement)"),
            unit="ops",
            width=8,
        ),
        row("Consumer lag"),
        timeseries(
            "Consumer lag by group and topic",
            f"How far behind each consumer group is, in messages (the lag exporter). SurveilConsumerLagHigh pages past {LAG_THRESHOLD} for 5 minutes. A caught-up partition shows 1: the marker after the last message.",
            Query("group_topic:surveil_consumer_lag_messages:sum", "{{group}} {{topic}}"),
            thresholds=(("green", None), ("red", LAG_THRESHOLD)),
            custom={
                "drawStyle": "line",
                "lineWidth": 1,
                "fillOpacity": 10,
                "showPoints": "never",
                "spanNulls": False,
                "thresholdsStyle": {"mode": "line"},
            },
            width=16,
        ),
        stat(
            "Offsets last read",
            "How old the lag figures are: seconds since the lag exporter last read the offsets. Past 60 s, SurveilConsumerLagUnknown.",
            Query("time() - max(surveil_lag_exporter_last_success_timestamp_seconds)"),
            unit="s",
            decimals=0,
            thresholds=(("green", None), ("red", 60)),
            width=8,
        ),
        bars(
            "Partitions behind",
            "Which partitions hold the lag now (those more than 1 behind).",
            Query("sort_desc(surveil_consumer_lag_messages > 1)", "{{group}} {{topic}}/{{partition}}"),
            width=24,
            height=6,
            thresholds=(("green", None), ("orange", 100), ("red", LAG_THRESHOLD)),
        ),
        row("Latency"),
        timeseries(
            "Detection latency",
            "From an event's time at the table to the detectors having processed it, and of that, from its "
            "publisher's send (the broker's and the detectors' share; the rest is upstream): p50 and p99 over 5 minutes.",
            *quantile_queries("surveil_detection_latency_seconds"),
            *quantile_queries("surveil_detection_queue_latency_seconds", legend=" since published"),
            unit="s",
            width=6,
        ),
        quantiles(
            "Alert latency by topic",
            "From the event that revealed a finding to its alert being published, by the topic the event "
            "came from: baccarat.shoe is card read to alert; baccarat.settlement counts from the round's time, two hops. "
            "p50 and p99 over 5 minutes.",
            "surveil_alert_latency_seconds",
            level="job_topic",
        ),
        quantiles(
            "Settlement lag",
            "From a round's completion at the table to its settlement: p50 and p99 over 5 minutes.",
            "surveil_settlement_lag_seconds",
        ),
        timeseries(
            "Batch and commit time by service",
            "Time to process and commit one batch of input events (table-controller, "
            "settlement), and an offset commit of the detectors (their changed tables to the changelog, then the offsets; "
            "past COMMIT_TIMEOUT_S the worker stops): p50 and p99 over 5 minutes.",
            *quantile_queries("surveil_batch_seconds", level="service"),
            *quantile_queries("surveil_detection_commit_seconds", legend=" anomaly-detection commit"),
            unit="s",
            width=6,
        ),
        quantiles(
            "Input wait before a batch",
            "How long the table-controller's and settlement's inputs waited for the batch that took them up, from their "
            "publisher's send, by input topic: the gathering at the broker (KAFKA_GATHER_MS), the broker, the batch before. "
            "p50 and p99 over 5 minutes.",
            "surveil_intake_queue_latency_seconds",
            level="service_topic",
        ),
        timeseries(
            "Batch time by phase",
            "Where a batch of table-controller and settlement goes, on average over 5 minutes: apply (its events decoded, "
            "checked and processed, their state read from Redis), state_commit (Redis' transaction), transaction (the "
            "Kafka transaction: outputs published, offsets committed). The three add up to the batch: a slow batch is "
            "the rules, Redis or the broker.",
            Query("service_phase:surveil_batch_phase_seconds:mean5m", "{{service}} {{phase}}"),
            unit="s",
            width=18,
        ),
        row("Dead letters and rejections"),
        timeseries(
            "Dead letters by service and origin",
            "Inputs rejected to the dead letters (baccarat.deadletter.<service>), per 5 minutes, by the service that rejected them and where they came from. SurveilDeadLetters warns on any.",
            Query("sum by (service, origin) (increase(surveil_dead_letters_total[5m])) > 0", "{{service}} {{origin}}"),
            decimals=0,
            width=12,
        ),
        bars(
            "Settlement rejections by kind",
            "Table events settlement refused in the time range, by kind.",
            Query("sort_desc(sum by (kind) (increase(surveil_settlement_rejections_total[$__range])) > 0)", "{{kind}}"),
            decimals=0,
            width=6,
        ),
        bars(
            "Shoe lines rejected by problem",
            "Shoe lines the reader rejected in the time range, by problem (docs/shoe-protocol.md).",
            Query("sort_desc(sum by (problem) (increase(surveil_shoe_reader_rejected_lines_total[$__range])) > 0)", "{{problem}}"),
            decimals=0,
            width=6,
        ),
        row("Shoe reader"),
        stat(
            "Shoe connections",
            "Shoe (or gateway) connections open now.",
            Query('sum(surveil_shoe_reader_connections{job="shoe-reader"})'),
            decimals=0,
            width=6,
            height=8,
        ),
        timeseries(
            "Shoe lines per second by result",
            "Lines received from the shoes, by what became of them.",
            Query("sum by (result) (rate(surveil_shoe_reader_lines_total[5m]))", "{{result}}"),
            unit="ops",
            width=12,
        ),
        stat(
            "Sequence gaps",
            "Shoe lines in the time range that skipped sequence numbers of their table: lines lost between a shoe and the reader.",
            Query('sum(increase(surveil_shoe_reader_sequence_gaps_total{job="shoe-reader"}[$__range])) or vector(0)'),
            decimals=0,
            thresholds=ALARM_AT_1,
            width=6,
            height=8,
        ),
        row("Processes"),
        timeseries(
            "Resident memory",
            "Memory of each service's process.",
            Query(f"process_resident_memory_bytes{{{SERVICE_JOBS}}}", "{{job}}"),
            unit="bytes",
        ),
        timeseries(
            "CPU",
            "CPU seconds per second each service's process uses.",
            Query(f"rate(process_cpu_seconds_total{{{SERVICE_JOBS}}}[5m])", "{{job}}"),
            unit="percentunit",
        ),
        timeseries(
            "Garbage collection pauses",
            "The share of the time each service's process stood still for its garbage collector, every generation "
            "(surveil_gc_pause_seconds): the detectors process no event meanwhile.",
            Query(f"sum by (job) (rate(surveil_gc_pause_seconds_sum{{{SERVICE_JOBS}}}[5m]))", "{{job}}"),
            unit="percentunit",
        ),
        timeseries(
            "Detectors' tables decoded per second",
            "Tables' values each detectors' worker decoded from its store for an event (surveil_detection_tables_decoded_total): "
            "each table once after a start or a rebalance; a steady rate is a worker holding more tables than WATCH_CACHE_TABLES.",
            Query('sum by (instance) (rate(surveil_detection_tables_decoded_total{job="anomaly-detection"}[5m]))', "{{instance}}"),
            unit="ops",
        ),
    ]
    return dashboard(
        "surveil-pipeline",
        "Surveillance: pipeline health",
        "Is the floor fully watched? Services up, consumer lag, latency, dead letters, events per second.",
        panels,
    )


DASHBOARDS = {
    "floor-overview.json": floor_overview,
    "table-drill-down.json": table_drill_down,
    "pipeline-health.json": pipeline_health,
}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is not what this script makes")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path = OUT / name
        text = render(build)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        elif not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(HERE.parent.parent)}")
    extra = sorted(p.name for p in OUT.glob("*.json") if p.name not in DASHBOARDS)
    if stale or extra:
        print(f"not what ops/grafana/generate.py makes: {', '.join(stale + extra)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
