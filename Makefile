# memoryui: `make run` serves the dashboard, `make test` runs the whole suite.
# Both do all set-up first (`make install`, idempotent).

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed
# MCP clients written by others (npm, versions pinned in tests/clients/package-lock.json) that the
# end-to-end tests drive: the MCP Inspector's CLI.
CLIENTS := tests/clients/node_modules/.installed

.PHONY: install run test test-fast lint format bench bench-load clean lock

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

$(CLIENTS): tests/clients/package-lock.json
	@command -v npm >/dev/null || { echo "make test needs Node.js and npm (the MCP Inspector is a test client)"; exit 1; }
	npm ci --prefix tests/clients --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $(CLIENTS)

# The web server and, beside it, the Celery workers that do the background work, under honcho
# (Procfile): `index` applies index updates, `bulk` does extraction, clean-up, dedup and
# calibration and runs the schedule (--beat: decay of expired memories), so no amount of bulk
# work delays an index update; with no CELERY_BROKER_URL they talk through a SQLite broker
# file in the data dir. One Ctrl-C, or an INT or TERM to make alone, stops them all and ends quietly:
# make does not pass an INT on, so honcho runs under config/supervise.py's launcher, which the
# recipe `exec`s (make's child) and which notices make's INT as well (see there).
run: install
	$(PY) manage.py bootstrap --url http://$(HOST):$(PORT)/
	exec env HOST=$(HOST) PYTHONUNBUFFERED=1 $(PY) config/supervise.py --launch -- $(VENV)/bin/honcho start --port $(PORT)

# The suite runs on every core (pytest-xdist): a test file on one worker, so a module's servers
# start once, and the tests that start whole stacks of processes one after another (groups set in
# tests/conftest.py). TEST_JOBS=0 runs it in one process.
TEST_JOBS ?= auto
XDIST = -n $(TEST_JOBS) --dist loadgroup
# The slowest tests are listed at the end of each run: the suite must stay well inside CI's time.
PYTEST_ARGS ?= --durations=30

test: install $(CLIENTS)
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest $(XDIST) -m "not e2e" $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

# Recompile the locks from pyproject.toml's dependencies (keeps the pins it can).
lock: install
	$(VENV)/bin/pip-compile -q --strip-extras --no-emit-index-url --no-emit-find-links \
		--output-file requirements.txt pyproject.toml
	$(VENV)/bin/pip-compile -q --extra dev --strip-extras --no-emit-index-url --no-emit-find-links \
		--output-file requirements-dev.txt pyproject.toml

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: install
	$(PY) bench/list_and_stats.py
	$(PY) bench/retrieval_quality.py
	$(PY) bench/ingest.py
	$(PY) bench/retrieval_latency.py --sizes 10000
	$(PY) bench/mcp.py
	$(PY) bench/recall_latency.py
	$(PY) bench/extraction.py

# The real server and workers under 50 clients, then an extraction flood (about 10 minutes).
bench-load: install
	$(PY) bench/load.py

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache
