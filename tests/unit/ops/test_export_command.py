"""``surveil export`` and ``surveil --version`` without a broker: the window's times must carry
a time zone and come in order, the manifest's name, the version from the package's metadata.
The export itself, on the real broker: tests/integration/detection/test_export_replays_live.py."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from click.testing import CliRunner

from surveil.analysis.export import manifest_path
from surveil.cli import main


def test_a_time_without_a_time_zone_is_refused() -> None:
    result = CliRunner().invoke(main, ["export", "--from", "2025-03-01T20:00", "--to", "2025-03-01T21:00+08:00", "--out", "x.jsonl.gz"])
    assert result.exit_code == 2 and "has no time zone" in result.output


def test_a_window_that_ends_before_it_starts_is_refused() -> None:
    window = ["--from", "2025-03-01T21:00+08:00", "--to", "2025-03-01T20:00+08:00"]
    result = CliRunner().invoke(main, ["export", *window, "--out", "x.jsonl.gz"])
    assert result.exit_code == 2 and "--to must come after --from" in result.output


def test_the_manifest_goes_beside_the_log() -> None:
    assert manifest_path(Path("/e/round.jsonl.gz")) == Path("/e/round.manifest.json")
    assert manifest_path(Path("round.jsonl")) == Path("round.manifest.json")


def test_the_version_is_the_installed_packages() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output == f"surveil {metadata.version('baccarat-surveil')}\n"
    assert "export" in CliRunner().invoke(main, ["--help"]).output
