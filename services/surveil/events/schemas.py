"""JSON Schemas of the contract, generated from the models: ``schemas/<type>.json``.

``python -m surveil.events.schemas DIR`` rewrites them; a test keeps the committed files in sync.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from .codec import EVENT_TYPES


def schema_of(type_name: str) -> dict[str, Any]:
    schema: dict[str, Any] = msgspec.json.schema(EVENT_TYPES[type_name])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://surveil.example/schemas/{type_name}.json",
        "title": type_name,
        **schema,
    }


def render(type_name: str) -> str:
    return json.dumps(schema_of(type_name), indent=2, sort_keys=True) + "\n"


def write_all(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for type_name in EVENT_TYPES:
        path = folder / f"{type_name}.json"
        path.write_text(render(type_name), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(path)
