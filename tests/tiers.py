"""The suite's time by tier, printed at the end of every run (and written as JSON with --tiers-json).

Four tiers, by what a test drives:

- unit: code called directly (the store, the indexes, ingestion, hygiene, recall, settings);
- api: HTTP through Django's test client, the REST API, the pages and MCP (tests/api, tests/web,
  tests/mcpserver), not marked e2e;
- browser: a real Chromium driven by Playwright (tests/browser);
- e2e: everything else marked e2e: real servers, workers, brokers and clients in processes of
  their own (tests/integration, the stdio MCP server, the labelled sets end to end).

A test's time is its setup, call and teardown. With pytest-xdist the tiers' times add up the
workers' time, so they are more than the run's wall-clock time, printed beside them.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest

TIERS = ("unit", "api", "browser", "e2e")
HTTP_DIRS = ("tests/api/", "tests/web/", "tests/mcpserver/")


def tier_of(nodeid: str, e2e: bool) -> str:
    if nodeid.startswith("tests/browser/"):
        return "browser"
    if e2e:
        return "e2e"
    return "api" if nodeid.startswith(HTTP_DIRS) else "unit"


class TierClock:
    def __init__(self, json_path: str | None):
        self.json_path = json_path
        self.started = time.monotonic()
        self.e2e: dict[str, bool] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    @pytest.hookimpl
    def pytest_collection_modifyitems(self, items) -> None:
        self.e2e.update({item.nodeid: item.get_closest_marker("e2e") is not None for item in items})

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report) -> None:
        # Under xdist the controller collects too (the same items), and gets every worker's reports.
        tier = tier_of(report.nodeid, self.e2e.get(report.nodeid, "e2e" in report.keywords))
        self.seconds[tier] += report.duration
        self.tests[tier].add(report.nodeid)

    def table(self) -> dict:
        return {
            "wall_seconds": round(time.monotonic() - self.started, 1),
            "tiers": {
                tier: {"tests": len(self.tests[tier]), "seconds": round(self.seconds[tier], 1)}
                for tier in TIERS
                if self.tests[tier]
            },
        }

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        table = self.table()
        if not table["tiers"]:
            return
        terminalreporter.section("time by tier")
        terminalreporter.write_line(f"{'tier':<8} {'tests':>6} {'seconds':>9}")
        for tier, row in table["tiers"].items():
            terminalreporter.write_line(f"{tier:<8} {row['tests']:>6} {row['seconds']:>9.1f}")
        total = sum(row["seconds"] for row in table["tiers"].values())
        terminalreporter.write_line(f"{'all':<8} {'':>6} {total:>9.1f}   wall clock {table['wall_seconds']:.1f}")
        if self.json_path:
            Path(self.json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(self.json_path).write_text(json.dumps(table, indent=2) + "\n")


def pytest_addoption(parser) -> None:
    parser.addoption("--tiers-json", metavar="PATH", help="also write the time by tier to PATH as JSON")


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller adds up its reports
    config.pluginmanager.register(TierClock(config.getoption("--tiers-json")), "memoryui-tiers")
