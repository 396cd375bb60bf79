"""CPU seconds per process over a window (not a test): which process of a running stack takes the cores.

.venv/bin/python bench/cpu_share.py 30      # start bench/latency.py first, run this during its load
"""

from __future__ import annotations

import sys
import time

import psutil


def snapshot() -> dict[int, tuple[str, float]]:
    found = {}
    for p in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        times = p.info["cpu_times"]
        if times is not None:
            found[p.info["pid"]] = (" ".join(p.info["cmdline"] or [])[:150], times.user + times.system)
    return found


def main() -> None:
    window_s = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    before = snapshot()
    time.sleep(window_s)
    after = snapshot()
    rows = sorted(
        ((cpu - before.get(pid, (cmd, 0.0))[1], pid, cmd) for pid, (cmd, cpu) in after.items()), reverse=True
    )
    total = sum(r[0] for r in rows)
    print(f"total {total:.1f} CPU-s over {window_s:.0f} s = {total / window_s:.2f} cores")
    for used, pid, cmd in rows[:25]:
        if used > 0.05:
            print(f"{used:7.1f} s {100 * used / window_s:5.1f} %  {pid:7d} {cmd}")


if __name__ == "__main__":
    main()
