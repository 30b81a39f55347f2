"""Seeds of randomised tests: a new one each run, printed, and set again from the environment to
reproduce a run (``FUZZ_SEED=123 ops/test.sh tests/faults``)."""

from __future__ import annotations

import contextlib
import os
import random

import pytest


def seed(variable: str) -> int:
    """``$variable`` if set, else a new random seed."""
    return int(os.environ.get(variable) or random.SystemRandom().randrange(2**32))


def announce(config: pytest.Config, what: str, variable: str, value: int) -> None:
    """Say the seed on the terminal, past pytest's capture of the output."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        print(f"\n{what}: seed {value} ({variable}={value} reproduces it)", flush=True)
