"""Sums what ``bench/census_hook/sitecustomize.py`` counted (not a test): per consumer, its fetches and
the partition reads they made; per topic, the batches produced to it.

    SUANLI_FETCH_CENSUS=/tmp/census PYTHONPATH=$PWD/bench/census_hook .venv/bin/python bench/latency.py
    .venv/bin/python bench/fetch_census.py /tmp/census

On Tansu a parked fetch costs the broker CPU in proportion to the batches stored in the partitions it
reads (bench/tansu_fetch.py), so partition reads x batches of those topics says which consumer costs it
most. Counts cover each process's life up to its last dump (every 2 s).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("census", type=Path, help="the SUANLI_FETCH_CENSUS directory")
    args = parser.parse_args()
    fetches: Counter[tuple[str, str, str, int]] = Counter()
    reads: Counter[tuple[str, str, str, int]] = Counter()
    batches: Counter[str] = Counter()
    for dump in sorted(args.census.glob("*.json")):
        record = json.loads(dump.read_text())
        for key, n in record["counts"].items():
            kind, *rest = key.split("\t")
            if kind == "fetch":
                client, topics, parts, wait = rest
                consumer = (record["command"][:60], client, topics, int(wait))
                fetches[consumer] += n
                reads[consumer] += n * int(parts)
            elif kind == "batches":
                batches[rest[0]] += n
    print(f"{'partition reads':>15} {'fetches':>8} {'wait':>6}  process | client | topics")
    for consumer, n in reads.most_common():
        command, client, topics, wait = consumer
        print(f"{n:>15,} {fetches[consumer]:>8,} {wait:>4}ms  {command} | {client} | {topics}")
    print(f"\npartition reads in all: {sum(reads.values()):,}\n\nbatches produced per topic:")
    for topic, n in batches.most_common():
        print(f"{n:>8,}  {topic}")


if __name__ == "__main__":
    main()
