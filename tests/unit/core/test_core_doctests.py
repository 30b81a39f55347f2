"""The docstring examples of the rules core and the event codec run as tests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import surveil.core
import surveil.events

MODULES = sorted(
    f"{package.__name__}.{info.name}" for package in (surveil.core, surveil.events) for info in pkgutil.iter_modules(package.__path__)
)


def test_the_core_and_events_modules_are_all_collected() -> None:
    assert {"surveil.core.play", "surveil.core.money", "surveil.core.cards", "surveil.events.codec"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, raise_on_error=False, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"


def test_the_rule_modules_have_examples() -> None:
    """So the doctest run above is not vacuous."""
    attempted = {
        name: doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS).attempted
        for name in ("surveil.core.cards", "surveil.core.play", "surveil.core.money", "surveil.core.procedure")
    }
    assert all(attempted.values()), attempted
