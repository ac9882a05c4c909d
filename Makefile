# memoryui: `make run` serves the dashboard, `make test` runs the whole suite.
# Both do all set-up first (`make install`, idempotent).

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast lint format bench clean lock

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

# The web server and, beside it, the Celery worker that does the background work (index
# updates, extraction, clean-up) with the embedded scheduler (--beat: decay of expired memories);
# with no CELERY_BROKER_URL they talk through a SQLite broker file in the data dir.
# Stopping `make run` (Ctrl-C) stops both.
run: install
	$(PY) manage.py bootstrap --url http://$(HOST):$(PORT)/
	@trap 'kill 0' INT TERM EXIT; \
	$(VENV)/bin/celery -A memoryui worker --beat --concurrency 1 --loglevel WARNING & \
	$(VENV)/bin/gunicorn memoryui.wsgi --bind $(HOST):$(PORT) --workers 2 --threads 4 \
		--access-logfile - --error-logfile - --log-level warning

test: install
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -m "not e2e" $(PYTEST_ARGS)

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
	$(PY) bench/recall_latency.py
	$(PY) bench/extraction.py

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache
