"""The package's layers run one way (pyproject.toml, ``[tool.importlinter]``): core, events,
detect, runtime, then the services, analysis and the simulator, then the embedded pipeline, then
the commands and the demo. A module imports only from layers below its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contract, on the package found in ``package_parent``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layers_hold() -> None:
    result = lint_imports(ROOT / "services")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_import_that_runs_up_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "services" / "surveil", tmp_path / "surveil", ignore=shutil.ignore_patterns("__pycache__"))
    cards = tmp_path / "surveil" / "core" / "cards.py"
    cards.write_text(cards.read_text() + "\nfrom ..runtime import config  # the core reaching up\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "surveil.core.cards -> surveil.runtime.config" in result.stdout, result.stdout
