"""What the profiles of ``bench/pipeline.py live --profile DIR`` say (``bench/profiles.py``), per
process: the share of its samples by thread, in each function with what it calls (inclusive), and
at the top of the stack (self), the most first.

- py-spy's (``NAME.speedscope.json``) keep only the thread holding the interpreter, so a process'
  samples are its Python's busy time: py-spy weighs each sample by its interval, and with
  ``--seconds`` (the recording's length, the measured window) their sum is shown as a share of a
  core.
- The broker's (``kafka.jfr``, the JVM's flight recorder, read with the JDK's ``jfr``): Java stacks
  of the threads running Java code, every 10 ms, 64 frames deep; shares only.

    .venv/bin/python bench/profile_summary.py --seconds 180 profiles/1000-tables/*
    .venv/bin/python bench/profile_summary.py --top 40 --match kafka profiles/1000-tables/table-controller.speedscope.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

Sample = tuple[str, list[str], float]  # thread, frames (innermost last), weight


def speedscope_samples(path: Path) -> Iterator[Sample]:
    profile = json.loads(path.read_text())
    # By function: py-spy makes a frame of each line.
    frames = [f"{f['name']} ({'/'.join(Path(f.get('file') or '?').parts[-2:])})" for f in profile["shared"]["frames"]]
    for thread in profile["profiles"]:
        name = re.sub(r"Thread \d+ ", "", thread["name"])
        for stack, weight in zip(thread["samples"], thread["weights"], strict=True):
            yield name, [frames[i] for i in stack], weight


def jfr_samples(path: Path) -> Iterator[Sample]:
    # jfr prints 5 frames of a stack unless asked for more; the recording has 64.
    command = ["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", str(path)]
    printed = subprocess.run(command, capture_output=True, check=True)
    for event in json.loads(printed.stdout)["recording"]["events"]:
        values = event["values"]
        thread = values["sampledThread"]["javaName"] or values["sampledThread"]["osName"]
        frames = [f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}" for f in values["stackTrace"]["frames"]]
        yield re.sub(r"\d+", "N", thread), frames[::-1], 1.0


def summary(path: Path, top: int, match: str, seconds: float | None) -> list[str]:
    jfr = path.suffix == ".jfr"
    samples = jfr_samples(path) if jfr else speedscope_samples(path)
    total = 0.0
    threads: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for thread, stack, weight in samples:
        total += weight
        threads[thread] += weight
        for name in set(stack):
            inclusive[name] += weight
        if stack:
            own[stack[-1]] += weight
    if not total:
        return [f"== {path.name}: no samples"]
    size = f"{total:.0f} samples" if jfr else f"{total:.1f} s sampled"
    busy = f", {total / seconds:.0%} of a core" if seconds and not jfr else ""
    lines = [f"== {path.name}: {size}{busy}", "  threads:"] + [f"  {n / total:6.1%}  {name}" for name, n in threads.most_common(8)]
    lines += ["  inclusive:"] + [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common() if match in name][:top]
    lines += ["  self:"] + [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(12)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path, help="the .speedscope.json and .jfr files bench/profiles.py wrote")
    parser.add_argument("--top", type=int, default=30, help="functions shown per process")
    parser.add_argument("--match", default="", help="only functions whose name or file contains this")
    parser.add_argument("--seconds", type=float, help="the recording's length: py-spy's busy time as a share of a core")
    args = parser.parse_args()
    for path in args.profiles:
        if path.name.endswith((".speedscope.json", ".jfr")):
            print("\n".join(summary(path, args.top, args.match, args.seconds)))


if __name__ == "__main__":
    main()
