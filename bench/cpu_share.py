"""CPU seconds per process over a window (not a test): which process of a running stack takes the cores.

    .venv/bin/python bench/cpu_share.py 30               # during bench/latency.py's load
    .venv/bin/python bench/cpu_share.py 5 --repeat 14    # a row of shares every 5 s, to see one grow

PostgreSQL's backends are summed as one "postgres" line: its share is the server's, whichever
connection spends it.
"""

from __future__ import annotations

import argparse
import time

import psutil


def snapshot() -> dict[int, tuple[str, float]]:
    found = {}
    for p in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        times = p.info["cpu_times"]
        if times is not None:
            cmd = " ".join(p.info["cmdline"] or [])
            found[p.info["pid"]] = (
                "postgres" if cmd.startswith("postgres:") else cmd[:150],
                times.user + times.system,
            )
    return found


def shares(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> list[tuple[float, str]]:
    """CPU seconds spent between two snapshots, per command line (postgres summed), largest first."""
    used: dict[str, float] = {}
    for pid, (cmd, cpu) in after.items():
        used[cmd] = used.get(cmd, 0.0) + cpu - before.get(pid, (cmd, 0.0))[1]
    return sorted(((s, cmd) for cmd, s in used.items()), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("window_s", type=float, nargs="?", default=30.0)
    parser.add_argument("--repeat", type=int, default=1, help="windows one after another")
    args = parser.parse_args()
    before = snapshot()
    for n in range(args.repeat):
        time.sleep(args.window_s)
        after = snapshot()
        rows = shares(before, after)
        before = after
        total = sum(r[0] for r in rows)
        print(
            f"window {n + 1}: total {total:.1f} CPU-s over {args.window_s:.0f} s"
            f" = {total / args.window_s:.2f} cores"
        )
        for used, cmd in rows[:25]:
            if used > 0.05:
                print(f"{used:7.1f} s {100 * used / args.window_s:5.1f} %  {cmd}")


if __name__ == "__main__":
    main()
