"""Avro codec cost per event, without the broker: the CPU floor of each side of the bus.

    .venv/bin/python bench/codec.py [--count 4000] [--runs 5]

Encodes and decodes `--count` TaskPlaced records (the records `bench/bus.py` sends) `--runs` times and
prints the best run's per-event encode and decode time. To compare two trees, run it from each, in turn.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any


def _bus_bench() -> Any:
    # The records and the timing are bench/bus.py's own, so both benches measure the same thing.
    spec = importlib.util.spec_from_file_location("bus_bench", Path(__file__).with_name("bus.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bus = _bus_bench()
    records = [bus.placement(n, nodes=256) for n in range(args.count)]
    runs = [bus.codec_cost_us(records) for _ in range(args.runs)]
    encode, decode = min(runs, key=lambda r: r[0] + r[1])
    print(
        f"codec: {args.count} TaskPlaced, best of {args.runs}: encode {encode:.1f} us, decode {decode:.1f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
