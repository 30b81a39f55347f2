"""ops/grafana: the dashboards are what ops/grafana/generate.py makes, are provisioned against the
pinned Prometheus datasource, and every query they (and the Prometheus rules) run asks for metrics
and labels that exist: exported by the services' code (the prometheus_client collectors their
modules register) or recorded by ops/prometheus/rules/recording.yml.

Metrics the dashboards need that no service exports yet are listed in ``AWAITED`` with what to add
where; the panels that use them are expected failures (XFAIL in the report, with the reason), and
``test_awaited_metrics_are_still_missing`` fails once one exists, so that the list stays true.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from surveil.core.odds import tabled_outcome_counts
from surveil.core.play import Outcome
from surveil.runtime.metrics import table_families

ROOT = Path(__file__).resolve().parents[3]
GRAFANA = ROOT / "ops" / "grafana"
DASHBOARD_DIR = GRAFANA / "dashboards"
RULES = ROOT / "ops" / "prometheus" / "rules"
DOCS = ROOT / "docs" / "monitoring.md"

# The modules whose collectors the services serve on /metrics (each service serves the default
# registry: the runtime's metrics, its own, and prometheus_client's process and platform ones).
SERVICE_MODULES = (
    "surveil.runtime.metrics",
    "surveil.shoe_reader.service",
    "surveil.settlement.metrics",
    "surveil.anomaly_detection.metrics",
    "surveil.runtime.lag_exporter",
)
TARGET_LABELS = frozenset({"job", "instance", "service"})  # added by Prometheus' scrape config
ANY_LABEL = None  # ALERTS carries each alerting rule's labels

# Metrics (or labels) the dashboards use that the services do not export yet: what to add, where.
AWAITED: dict[str, str] = {}


# ---- the generator ------------------------------------------------------------------------------


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("surveil_grafana_generate", GRAFANA / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


generate = load_generator()


def dashboards() -> dict[str, dict[str, Any]]:
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARD_DIR.glob("*.json"))}


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from (panel for panel in board["panels"] if panel["type"] != "row")


def all_queries() -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every templating variable."""
    for name, board in dashboards().items():
        for panel in panels(board):
            for target in panel["targets"]:
                yield f"{name}: {panel['title']} [{target['refId']}]", target["expr"]
        for var in board["templating"]["list"]:
            yield f"{name}: variable {var['name']}", var["definition"]


# ---- a PromQL reader, enough for metric and label names -----------------------------------------

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>0x[0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}\[\]@])
""",
    re.X,
)
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = GROUPING | {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
AGGREGATORS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}
LABEL_CREATORS = {"label_replace", "label_join"}  # their second argument is the label they make


@dataclass
class Expr:
    metrics: dict[str, set[str]] = field(default_factory=dict)  # metric -> labels in its matchers
    grouping: set[str] = field(default_factory=set)  # labels in by/without/on/ignoring/group_*
    created: set[str] = field(default_factory=set)  # labels label_replace/label_join make


def grafana_free(expr: str) -> str:
    """The query with Grafana's variables replaced by values Prometheus accepts."""
    expr = re.sub(r"\$__\w+", "5m", expr)  # $__range, $__rate_interval, $__interval
    expr = re.sub(r"\$\{\w+(?::\w+)?\}|\$\w+|\[\[\w+\]\]", "X", expr)
    return re.sub(r"^label_values\((\w+), *\w+\)$", r"\1", expr)  # a variable's query: the metric


def label_values_label(expr: str) -> str | None:
    found = re.fullmatch(r"label_values\((\w+), *(\w+)\)", expr)
    return found.group(2) if found else None


def tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        match = TOKEN.match(expr, pos)
        assert match, f"cannot read {expr[pos:]!r} in {expr!r}"
        pos = match.end()
        if match.lastgroup != "ws":
            out.append((match.lastgroup or "", match.group()))
    return out


def read(expr: str) -> Expr:
    """The metric names, matcher labels and grouping labels of a PromQL expression."""
    found = Expr()
    toks = tokens(grafana_free(expr))
    calls: list[list[Any]] = []  # [function or None, argument index] per open parenthesis
    i = 0

    def label_list(start: int) -> int:  # "(a, b)" from toks[start]; returns the index after ")"
        j = start + 1
        while toks[j][1] != ")":
            if toks[j][0] == "ident":
                found.grouping.add(toks[j][1])
            j += 1
        return j + 1

    def matchers(start: int, metric: str | None) -> int:  # "{l="v", ...}" from toks[start]
        j, labels = start + 1, set()
        while toks[j][1] != "}":
            if toks[j][0] == "ident" and toks[j + 1][1] in ("=", "!=", "=~", "!~"):
                if toks[j][1] == "__name__" and toks[j + 1][1] == "=":
                    metric = toks[j + 2][1].strip("\"'`")
                labels.add(toks[j][1])
            j += 1
        if metric is not None:
            found.metrics.setdefault(metric, set()).update(labels - {"__name__"})
        return j + 1

    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "ident" and text in GROUPING:
            i = label_list(i + 1) if following == "(" else i + 1
        elif kind == "ident" and (text in KEYWORDS or text in AGGREGATORS):
            i += 1
        elif kind == "ident" and following == "(":  # a function call
            calls.append([text, 0])
            i += 2
        elif kind == "ident" and following == "{":
            i = matchers(i + 1, text)
        elif kind == "ident":
            found.metrics.setdefault(text, set())
            i += 1
        elif text == "{":
            i = matchers(i, None)
        elif text == "[":  # a range or subquery: durations only
            while toks[i][1] != "]":
                i += 1
            i += 1
        else:
            if text == "(":
                calls.append([None, 0])
            elif text == ")":
                calls.pop()
            elif text == "," and calls:
                calls[-1][1] += 1
            elif kind == "string" and calls and calls[-1][0] in LABEL_CREATORS and calls[-1][1] == 1:
                found.created.add(text.strip("\"'`"))
            i += 1
    return found


def test_the_promql_reader_finds_metrics_and_labels() -> None:
    expr = read(
        'sort_desc(sum by (table) (increase(a_total{x="1", y=~"$v"}[$__range])) / on (table) group_left b:c:d)'
        ' or label_replace(vector(0.5), "outcome", "tie", "", "") or up{job="s"} offset 5m'
    )
    assert expr.metrics == {"a_total": {"x", "y"}, "b:c:d": set(), "up": {"job"}}
    assert expr.grouping == {"table"} and expr.created == {"outcome"}
    assert read("label_values(surveil_round_outcomes_total, table)").metrics == {"surveil_round_outcomes_total": set()}


# ---- what exists --------------------------------------------------------------------------------


@cache
def exported() -> dict[str, frozenset[str] | None]:
    """Every sample name the services expose, with its labels (the scrape adds TARGET_LABELS)."""
    for module in SERVICE_MODULES:
        importlib.import_module(module)
    names: dict[str, set[str]] = {}
    # The registry's map of collector -> exposed names is private, but it is the one place that
    # knows the names a labelled metric without children yet will expose.
    for collector, sample_names in REGISTRY._collector_to_names.items():  # noqa: SLF001
        labels = set(getattr(collector, "_labelnames", ()))
        for name in sample_names:
            names.setdefault(name, set()).update(labels | ({"le"} if name.endswith("_bucket") else set()))
    for family in REGISTRY.collect():
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    for table_family in table_families():  # written out by hand, beside the registry
        names.setdefault(table_family.name, set()).update(table_family.labelnames)
    return {name: frozenset(labels) for name, labels in names.items()}


def recording_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load((RULES / "recording.yml").read_text())["groups"] for rule in group["rules"]]


@cache
def known() -> dict[str, frozenset[str] | None]:
    """Exported, recorded (labels from the rule's level: ``table_outcome:...`` has table and
    outcome), and Prometheus' own ``up`` and ``ALERTS``."""
    recorded = {rule["record"]: frozenset(rule["record"].split(":")[0].split("_")) for rule in recording_rules()}
    return {**exported(), **recorded, "up": frozenset(), "ALERTS": ANY_LABEL}


def problems(query: str) -> list[str]:
    """What in ``query`` does not exist: ``metric NAME`` or ``label LABEL of NAME``."""
    expr = read(query)
    catalogue = known()
    found = []
    unknown = sorted(name for name in expr.metrics if name not in catalogue)
    found += [f"metric {name}" for name in unknown]
    var_label = label_values_label(query)
    available: set[str] = set(TARGET_LABELS) | expr.created
    for name, used in sorted(expr.metrics.items()):
        if name not in catalogue:
            continue
        labels = catalogue[name]
        if labels is ANY_LABEL:
            available |= expr.grouping
            continue
        available |= labels
        asked = used | ({var_label} if var_label else set())
        found += [f"label {label} of {name}" for label in sorted(asked - labels - TARGET_LABELS)]
    if not unknown:
        metrics = " / ".join(sorted(expr.metrics))
        found += [f"label {label} of {metrics}" for label in sorted(expr.grouping - available)]
    return sorted(set(found))


def panel_params() -> list[Any]:
    params = []
    for where, query in all_queries():
        missing = problems(query)
        marks = []
        if missing and all(item in AWAITED for item in missing):
            reason = "; ".join(f"awaits {item} -> {AWAITED[item]}" for item in missing)
            marks = [pytest.mark.xfail(reason=reason, strict=True)]
        params.append(pytest.param(query, id=where, marks=marks))
    return params


@pytest.mark.parametrize("query", panel_params())
def test_every_query_asks_for_metrics_and_labels_that_exist(query: str) -> None:
    assert problems(query) == []


def test_awaited_metrics_are_still_missing_and_still_used() -> None:
    used = {item for _, query in all_queries() for item in problems(query)}
    assert set(AWAITED) - used == set(), "no longer missing (or no longer used): remove them from AWAITED"


@pytest.mark.parametrize(
    "rule",
    [r for path in sorted(RULES.glob("*.yml")) for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]],
    ids=lambda r: r.get("record") or r.get("alert"),
)
def test_every_rule_asks_for_metrics_and_labels_that_exist(rule: dict[str, Any]) -> None:
    assert problems(rule["expr"]) == []


def test_the_per_table_metrics_the_floor_needs_are_exported() -> None:
    catalogue = exported()
    assert catalogue["surveil_round_outcomes_total"] == {"table", "dealer", "outcome"}
    assert catalogue["surveil_table_last_event_timestamp_seconds"] == {"table"}
    assert catalogue["surveil_table_shoe_in_play"] == {"table"}
    assert catalogue["surveil_consumer_lag_messages"] == {"group", "topic", "partition"}


# ---- the dashboards themselves ------------------------------------------------------------------


def test_the_dashboards_are_what_generate_py_makes() -> None:
    assert generate.main(["--check"]) == 0, "run: .venv/bin/python ops/grafana/generate.py, and commit the JSON"


def test_the_three_dashboards_with_pinned_uids() -> None:
    boards = dashboards()
    assert {board["uid"]: board["title"] for board in boards.values()} == {
        "surveil-floor": "Surveillance: floor overview",
        "surveil-table": "Surveillance: table drill-down",
        "surveil-pipeline": "Surveillance: pipeline health",
    }
    assert [v["name"] for v in boards["table-drill-down.json"]["templating"]["list"]] == ["table"]
    assert "patron.json" not in boards  # no patron's play on a board anyone may open (docs/monitoring.md)


def test_every_panel_and_variable_names_the_provisioned_datasource_by_uid() -> None:
    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [source] = provisioned["datasources"]
    assert source["uid"] == generate.DATASOURCE["uid"] and source["type"] == generate.DATASOURCE["type"]
    for board in dashboards().values():
        for panel in panels(board):
            assert panel["datasource"] == generate.DATASOURCE, panel["title"]
            assert all(target["datasource"] == generate.DATASOURCE for target in panel["targets"]), panel["title"]
        assert all(var["datasource"] == generate.DATASOURCE for var in board["templating"]["list"])


def test_the_dashboards_are_provisioned_from_where_compose_mounts_them() -> None:
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "dashboards.yml").read_text())
    [files] = provider["providers"]
    assert files["type"] == "file" and files["options"]["path"] == "/var/lib/grafana/dashboards"


def test_every_panel_says_what_it_answers_and_fits_the_grid() -> None:
    for name, board in dashboards().items():
        ids = [panel["id"] for panel in board["panels"]]
        assert len(ids) == len(set(ids)), name
        cells: set[tuple[int, int]] = set()
        for panel in board["panels"]:
            grid = panel["gridPos"]
            assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, (name, panel["title"])
            mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
            assert not mine & cells, f"{name}: {panel['title']} overlaps another panel"
            cells |= mine
        for panel in panels(board):
            assert panel["description"] and panel["targets"], (name, panel["title"])
        titles = [panel["title"] for panel in panels(board)]
        assert len(titles) == len(set(titles)), name


def test_the_table_drill_down_compares_outcomes_with_the_exact_probabilities() -> None:
    counts = tabled_outcome_counts(8)
    exact = {o.value: float(counts.probability(o)) for o in (Outcome.BANKER, Outcome.PLAYER, Outcome.TIE)}
    assert {o: round(p, 4) for o, p in exact.items()} == {"banker": 0.4586, "player": 0.4462, "tie": 0.0952}
    [shares] = [p for p in panels(dashboards()["table-drill-down.json"]) if p["title"] == "Outcome shares"]
    exprs = " ".join(target["expr"] for target in shares["targets"])
    for outcome, p in exact.items():
        assert f'label_replace(vector({round(p, 6)}), "outcome", "{outcome}"' in exprs


def test_docs_monitoring_explains_every_dashboard_and_panel() -> None:
    docs = DOCS.read_text()
    for board in dashboards().values():
        assert board["title"] in docs, board["title"]
        for panel in panels(board):
            assert f"**{panel['title']}**" in docs, f"docs/monitoring.md does not explain {board['title']}: {panel['title']}"


# ---- promtool reads every query -----------------------------------------------------------------


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if not promtool:
        message = "PROMTOOL IS MISSING: the dashboards' PromQL was NOT parsed. Install it with ops/install.sh."
        if os.environ.get("CI"):
            pytest.fail(message + " Under CI this is a failure: the install step did not run.", pytrace=False)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    queries = [(where, grafana_free(query)) for where, query in all_queries() if not query.startswith("label_values(")]
    rules = {
        "groups": [{"name": "dashboards", "rules": [{"record": f"dashboard_query_{n}", "expr": q} for n, (_, q) in enumerate(queries)]}]
    }
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(queries)} rules found" in checked.stdout
