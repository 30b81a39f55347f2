"""``python -m surveil.shoe_reader [--capture FILE]``: the shoe-reader on TCP, or replaying a
capture file (one protocol line per line) and exiting. ``surveil serve shoe-reader`` is the TCP
service."""

from __future__ import annotations

import argparse
from pathlib import Path

from .service import main

parser = argparse.ArgumentParser(prog="python -m surveil.shoe_reader", description=__doc__)
parser.add_argument("--capture", type=Path, help="publish the lines of this capture file instead of listening on TCP")
main(parser.parse_args().capture)
