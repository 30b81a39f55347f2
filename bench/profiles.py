"""Sampling profiles of running Python processes with py-spy (the ``bench`` extra), one file per
process, in speedscope's format (open it at https://www.speedscope.app or with ``speedscope``).

py-spy reads the target's memory from outside (``process_vm_readv``: root, or ptrace allowed);
``--nonblocking`` leaves the target running while it reads, so the profile costs the measured
process nothing but the reader's own CPU, at the price of a few inconsistent stacks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

RATE = 50  # samples a second; py-spy's default (100) costs a loaded machine more than it tells


def py_spy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install -e '.[bench]'")
    return found


class Profiles:
    """``py-spy record`` on each of ``pids`` for a stretch of time, each into ``folder``/NAME.speedscope.json."""

    def __init__(self, folder: Path, pids: Mapping[str, int]) -> None:
        self.folder = folder
        self.pids = dict(pids)
        self.running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def start(self, seconds: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        program = py_spy()
        for name, pid in self.pids.items():
            out = self.folder / f"{name}.speedscope.json"
            log = (self.folder / f"{name}.py-spy.log").open("wb")
            command = [program, "record", "--pid", str(pid), "--duration", str(max(int(seconds), 1)), "--rate", str(RATE)]
            command += ["--nonblocking", "--format", "speedscope", "--output", str(out)]
            self.running[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), out)

    def finish(self, timeout: float = 60) -> dict[str, str]:
        """Wait for each recorder; the files written, by process (a failed one: its log)."""
        written = {}
        for name, (process, out) in self.running.items():
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.terminate()
                process.wait()
            written[name] = str(out) if out.exists() else f"failed: see {self.folder / (name + '.py-spy.log')}"
        return written
