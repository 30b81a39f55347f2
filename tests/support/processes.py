"""Free ports and processes, for the tests and the benchmarks (bench/ puts ``tests/`` on its path):
``free_port``; ``Launched``, a command (``surveil serve <service>``: ``Launched.serve``) as a
subprocess with its output in a log file, waited for until it answers; ``stop``, SIGTERM then
SIGKILL."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SURVEIL = ROOT / ".venv" / "bin" / "surveil"


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (the system's pick, released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> Callable[[], object]:
    """Ready when ``port`` of 127.0.0.1 takes a connection."""
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close()


def answering(url: str, timeout: float = 1) -> Callable[[], object]:
    """Ready when ``url`` answers (any HTTP error is an OSError: not ready)."""
    return lambda: urllib.request.urlopen(url, timeout=timeout).close()


class Launched(subprocess.Popen[bytes]):
    """``command`` as a subprocess, its stdout and stderr into ``log`` (appended to with ``append``)."""

    def __init__(
        self,
        command: Sequence[str | Path],
        env: Mapping[str, str] | None,
        log: Path,
        append: bool = False,
        cwd: Path | None = None,
    ) -> None:
        with log.open("ab" if append else "wb") as out:  # the child has its own copy of the file
            super().__init__([str(part) for part in command], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        self.log = log

    @classmethod
    def serve(cls, service: str, env: Mapping[str, str], log: Path, append: bool = False, cwd: Path | None = None) -> Launched:
        """``surveil serve <service>``, the venv's."""
        return cls([SURVEIL, "serve", service], env, log, append, cwd)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait_ready(
        self,
        ready: Callable[[], object],
        name: str,
        waiting: str,
        timeout: float = 60,
        pause: float = 0.1,
        logs: Callable[[], str] | None = None,
    ) -> None:
        """Until ``ready()`` returns without an OSError: a RuntimeError ("<name> exited") as soon
        as the process exits, a TimeoutError ("<name> <waiting>") after ``timeout`` seconds; each
        with ``logs()`` (the tail of the process' log by default)."""
        tail = logs or self.log_tail
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.poll() is not None:
                raise RuntimeError(f"{name} exited:\n{tail()}")
            try:
                ready()
                return
            except OSError:
                time.sleep(pause)
        raise TimeoutError(f"{name} {waiting}:\n{tail()}")


def stop(*processes: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM to each process still running, as an operator stops a service; SIGKILL to any
    still running ``timeout`` seconds later."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
