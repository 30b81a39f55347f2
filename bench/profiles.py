"""Sampling profiles of running processes over a stretch of time, one file per process: the Python
ones with py-spy (the ``bench`` extra), in speedscope's format (open it at
https://www.speedscope.app, or summarise it with ``bench/profile_summary.py``); the broker with the
JVM's own flight recorder (``jcmd``, from the JDK), as a ``.jfr`` file (``jfr``, or
``bench/profile_summary.py``).

py-spy reads the target's memory from outside (``process_vm_readv``: root, or ptrace allowed);
``--nonblocking`` leaves the target running while it reads, so the profile costs the measured
process nothing but the reader's own CPU, at the price of a few inconsistent stacks. ``--gil``
keeps only the samples of the thread that holds the interpreter: what the process' Python does.
Without it a thread waiting in ``select()`` (a Kafka client's I/O thread, idle) is sampled as
busy, and drowns the rest.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from broker_requests import BrokerRequestsError, jcmd

RATE = 50  # samples a second; py-spy's default (100) costs a loaded machine more than it tells


def py_spy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install -e '.[bench]'")
    return found


class Profiles:
    """Each of ``pids`` (Python) and ``jvms`` (Java: a broker's, ``broker_requests.jcmd``) profiled for
    a stretch of time, into ``folder``/NAME.speedscope.json and ``folder``/NAME.jfr."""

    def __init__(self, folder: Path, pids: Mapping[str, int], jvms: Mapping[str, int] | None = None) -> None:
        self.folder = folder
        self.pids = dict(pids)
        self.jvms = dict(jvms or {})
        self.running: dict[str, tuple[subprocess.Popen[bytes] | None, Path]] = {}
        self.until = 0.0

    def start(self, seconds: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        program = py_spy()
        duration = max(int(seconds), 1)
        self.until = time.time() + duration
        for name, pid in self.pids.items():
            out = self.folder / f"{name}.speedscope.json"
            command = [program, "record", "--pid", str(pid), "--duration", str(duration), "--rate", str(RATE)]
            command += ["--nonblocking", "--gil", "--format", "speedscope", "--output", str(out)]
            with self._log(name) as log:
                self.running[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), out)
        for name, pid in self.jvms.items():
            out = self.folder / f"{name}.jfr"
            out.unlink(missing_ok=True)  # an earlier run's would be taken for this one's
            with self._log(name) as log:
                try:
                    # "profile": Java stacks sampled every 10 ms (the default settings: 20), 64 frames
                    # deep; the JVM writes the file when the duration is over.
                    command = [*jcmd(pid), "JFR.start", "name=bench", f"duration={duration}s", "settings=profile"]
                    started = subprocess.run([*command, f"filename={out.resolve()}"], stdout=log, stderr=subprocess.STDOUT, check=False)
                except (OSError, BrokerRequestsError) as e:
                    log.write(f"{e}\n".encode())
                    continue
            if started.returncode == 0:
                self.running[name] = (None, out)

    def _log(self, name: str) -> IO[bytes]:
        return (self.folder / f"{name}.profile.log").open("ab")

    def finish(self, timeout: float = 60) -> dict[str, str]:
        """Wait for each recorder; the files written, by process (a failed one: its log)."""
        written = {name: f"failed: see {self.folder / (name + '.profile.log')}" for name in {**self.pids, **self.jvms}}
        for name, (process, out) in self.running.items():
            if process is None:  # the JVM writes its recording itself once the duration is over: until its size holds
                time.sleep(max(self.until - time.time(), 0))
                size = -1
                while time.time() < self.until + timeout and not (out.exists() and out.stat().st_size == size):
                    size = out.stat().st_size if out.exists() else -1
                    time.sleep(1)
            else:
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.terminate()
                    process.wait()
            if out.exists():
                written[name] = str(out)
        return written
