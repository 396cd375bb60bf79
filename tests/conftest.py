"""Shared fixtures: the real broker and PostgreSQL come from suanli.infra.testing.

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadscope`). Each worker starts its
own broker and database. The tests are handed out in groups (`group_of`): a module at a time, so a
module's fixtures (often a whole stack) are set up once; every end-to-end module but `suanli up`'s as one
group, on one worker, one after the other, because each runs a platform whose timing two at once on two
cores would distort; and `suanli up`'s run, which mostly waits on its jobs' simulated durations, as a
group of its own beside them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

pytest_plugins = ["suanli.infra.testing", "brokerkit"]

# The CLI falls back to the user's own config (~/.config/suanli/config.yaml) when SUANLI_CONFIG is unset,
# and several tests unset it. After a `suanli up` on the same machine that file holds a current context
# with TLS and a token, which those tests' CLI calls would then use against their own plaintext stack.
# Each test process gets an empty config home of its own instead.
_XDG = tempfile.mkdtemp(prefix="suanli-tests-config-")
os.environ["XDG_CONFIG_HOME"] = _XDG
atexit.register(shutil.rmtree, _XDG, ignore_errors=True)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # A worker is started with COLUMNS=80 in its environment; a rich console created at import would
    # keep that width for good, while in one process it follows the COLUMNS a CliRunner sets per call.
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

E2E = "tests/e2e/"
BESIDE_E2E = {"tests/e2e/test_up_headless.py"}


def group_of(nodeid: str) -> str:
    """The group of tests a test is handed out with: its module, or "e2e"."""
    module = nodeid.split("::", 1)[0]
    return "e2e" if module.startswith(E2E) and module not in BESIDE_E2E else module


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - pytest-xdist is a dev dependency; without it, one process
    pass
else:

    class GroupScheduling(LoadScopeScheduling):
        """loadscope, with `group_of` as the scope, in collection order (the end-to-end group early)."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    def pytest_xdist_make_scheduler(config: Any, log: Any) -> LoadScopeScheduling | None:
        if config.getvalue("dist") != "loadscope":
            return None
        config.option.loadscopereorder = False
        return GroupScheduling(config, log)
