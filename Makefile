# Every target installs what it needs first, so `make test` or `make demo` works on a fresh clone
# with nothing but Python >= 3.11 installed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test test-all test-unit test-integration test-e2e test-alerts prometheus chromium lint bench demo clean proto

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The alert and dashboard tests run Debian's prometheus/promtool; where they cannot be installed
# (no apt-get, no root) those checks are skipped with a reason instead of failing the whole run.
TRY_PROMETHEUS = @$(MAKE) --no-print-directory prometheus || echo "warning: prometheus not installed; its checks will be skipped" >&2

# Two workers by default (TEST_WORKERS=0 runs in one process): tests/conftest.py says how the tests are
# grouped between them.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope)

test: setup
	$(TRY_PROMETHEUS)
	$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

# Everything, including the slow benchmark-style checks kept out of the default run.
test-all: setup
	$(TRY_PROMETHEUS)
	$(BIN)/python -m pytest -q -m '' $(XDIST) $(PYTEST_ARGS)

# One level at a time (CONTRIBUTING.md): unit needs nothing running; integration holds the port
# contract suites and the integration tests, both against the real broker and PostgreSQL; e2e runs
# the platform's processes.
test-unit: setup
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

test-integration: setup
	$(BIN)/python -m pytest -q tests/contract tests/integration $(PYTEST_ARGS)

test-e2e: setup
	$(TRY_PROMETHEUS)
	$(BIN)/python -m pytest -q tests/e2e $(PYTEST_ARGS)

# The alerting rules (deploy/prometheus/rules): promtool validates the Prometheus config with its rules
# and runs the rules' unit tests in rules/tests/. promtool and prometheus (the dashboard test in
# tests/e2e/test_e2e_jobs.py) come with Debian's prometheus package, installed by the `prometheus`
# target when either is missing (apt-get, as root or through sudo).
PROMTOOL ?= promtool
test-alerts: prometheus
	$(PROMTOOL) check config deploy/prometheus/prometheus.yml
	$(PROMTOOL) test rules deploy/prometheus/rules/tests/*.yml

prometheus:
	@{ command -v $(PROMTOOL) && command -v prometheus; } >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "promtool missing and no apt-get: install Prometheus's promtool" >&2; exit 1; }; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends prometheus; }

# The console's browser test (tests/integration/console/test_console_browser.py) drives Debian's
# chromium with Playwright (Playwright's own browser download needs the internet; the Debian package
# does not); the test skips with a reason when either is missing. Installed like prometheus above.
CHROMIUM ?= chromium
chromium: setup
	@$(BIN)/python -c 'import playwright' 2>/dev/null || $(BIN)/python -m pip install --quiet playwright
	@command -v $(CHROMIUM) >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "chromium missing and no apt-get: install chromium" >&2; exit 1; }; \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium; }

# Fails on the first check that fails. lint-imports sees the namespace `suanli` only through the
# three roots on PYTHONPATH (the editable install's import hook is invisible to it).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONPATH=libs:services:apps $(BIN)/lint-imports --no-cache

# The gRPC stubs from schemas/proto (committed; tests/unit/api fails when they are stale).
proto: setup
	$(BIN)/python -m suanli.api.build

# One benchmark at a time (each needs the machine to itself); figures go to docs/BENCHMARKS.md by hand.
BENCHES ?= placement cycle bus relay latency
bench: setup
	@for b in $(BENCHES); do echo "== bench/$$b.py"; $(BIN)/python bench/$$b.py || exit 1; done

demo: setup
	$(BIN)/suanli up $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .suanli out bench/results
