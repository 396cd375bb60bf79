"""Where a process's samples went, from py-spy's collapsed stacks (not a test; a reading aid).

Reads the files `bench/latency.py --profile DIR` writes (one per service, `py-spy record -f raw`) and
prints the frames with the largest share of the samples: by self time (the frame on top) and inclusive
(the frame anywhere in the stack), optionally only the stacks that pass through ``--under`` (a frame's
name, e.g. ``schedule_cycle``), then shares of that subtree.

    .venv/bin/python bench/latency.py --profile /tmp/prof
    .venv/bin/python bench/stacks_top.py /tmp/prof/billing.txt
    .venv/bin/python bench/stacks_top.py /tmp/prof/scheduling.txt --under schedule_cycle --top 15
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def shares(path: Path, under: str | None) -> tuple[int, Counter[str], Counter[str]]:
    """(samples counted, samples per frame on top, samples per frame anywhere in the stack)."""
    total, on_top, anywhere = 0, Counter[str](), Counter[str]()
    for line in path.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if under is not None:
            at = next((i for i, f in enumerate(frames) if f.startswith(under)), None)
            if at is None:
                continue
            frames = frames[at:]
        n = int(count)
        total += n
        on_top[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    return total, on_top, anywhere


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("stacks", type=Path, help="a py-spy raw (collapsed stacks) file")
    parser.add_argument("--under", default=None, help="only stacks through this frame (its name's start)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    total, on_top, anywhere = shares(args.stacks, args.under)
    if not total:
        raise SystemExit("no samples")
    print(f"{total} samples" + (f" through {args.under}" if args.under else ""))
    for title, counts in (("self", on_top), ("inclusive", anywhere)):
        print(f"-- {title}")
        for frame, n in counts.most_common(args.top):
            print(f"{100 * n / total:5.1f}% {frame[:150]}")


if __name__ == "__main__":
    main()
