"""Reading the config file (every CLI start does) loads neither the client's stubs nor the spec models."""

from __future__ import annotations

import subprocess
import sys


def test_the_config_reader_is_light_and_the_client_loads_on_first_use() -> None:
    script = (
        "import sys\n"
        "import suanli.client.config\n"
        "print('BEFORE', sorted(m for m in ('pydantic', 'suanli.jobspec', 'suanli.client.scheduler')"
        " if m in sys.modules))\n"
        "from suanli.client import SchedulerClient\n"
        "print('AFTER', SchedulerClient.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "BEFORE []" in done.stdout, done.stdout
    assert "AFTER suanli.client.scheduler" in done.stdout, done.stdout
