"""The soak bench's pure parts (bench/soak.py): what it reads from `suanli up`, its samples, the pass
criteria and the report. The bench itself only starts `suanli up`, reads /proc and /metrics, and waits."""
