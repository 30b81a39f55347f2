"""Surveillance of Macau baccarat tables (the ``baccarat-surveil`` distribution)."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "baccarat-surveil"


def version() -> str:
    """The installed package's version (its metadata: pyproject.toml's at install time)."""
    return metadata.version(DISTRIBUTION)
