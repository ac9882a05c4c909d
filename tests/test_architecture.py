"""The apps stack one way, and no module imports itself round a cycle.

The contracts live in pyproject.toml ([tool.importlinter]) and `make test` runs `lint-imports`:
one layers contract lists every app, top floor first. Here every Python package of the tree is
shown to be on it, with no exception; a copy of the code with an upward import added on purpose
(inside a function: those count too) shows the check fails and names it; and the import graph is
searched for cycles.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES = tuple(LINTER["root_packages"])
APP_LAYERS = [c for c in LINTER["contracts"] if c["type"] == "layers" and not c.get("containers")]
LAYERS = APP_LAYERS[0]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def code_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("code")
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def floors() -> list[list[str]]:
    return [[app.strip() for app in floor.split("|")] for floor in LAYERS["layers"]]


def test_every_package_of_the_tree_is_an_app_on_the_one_layers_contract():
    tree = {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in ("tests", "bench", "deploy", "docs")
    }
    on_floors = [app for floor in floors() for app in floor]
    assert sorted(on_floors) == sorted(PACKAGES) == sorted(tree)
    assert len(APP_LAYERS) == 1  # one contract for the apps; others only stack the floors inside an app
    assert not any("ignore_imports" in contract for contract in LINTER["contracts"])
    assert not any("unmatched_ignore_imports_alerting" in contract for contract in LINTER["contracts"])


def test_the_contracts_hold_on_the_code_as_it_is(code_copy):
    result = lint_imports(code_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


LAYERS_CONTRACT = LAYERS["name"]

# An upward import from each floor to the one above it, and between the two apps that share a floor.
UPWARD = [
    ("memoryui/rules.py", "from searchindex import search"),
    ("memoryui/models/memory.py", "from ingest import writing"),
    ("searchindex/fusion.py", "from ingest import extraction"),
    ("ingest/writing.py", "from hygiene import dedup"),
    ("hygiene/dedup.py", "from recall import pipeline"),
    ("recall/heuristic.py", "from api import rest"),
    ("api/rest.py", "from web import shortcuts"),
    ("api/views.py", "from mcpserver import tools"),
    ("web/views.py", "from mcpserver import tools"),
    ("mcpserver/tools.py", "from web import forms"),
    ("web/forms.py", "from config import settings"),
    ("memoryui/runs.py", "from config import supervise"),
]


@pytest.mark.parametrize(("module", "line"), UPWARD)
def test_an_upward_import_fails_the_layers_contract_and_is_named(code_copy, tmp_path, module, line):
    broken = tmp_path / "broken"
    shutil.copytree(code_copy, broken)
    target = broken / module
    target.write_text(target.read_text() + f"\n\ndef _breaks_the_contract():\n    {line}  # noqa\n")
    result = lint_imports(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    broken_section = " ".join(result.stdout.split("Broken contracts", 1)[1].split())
    assert LAYERS_CONTRACT in broken_section
    assert line.split()[1] in broken_section  # the offending import is named


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("ingest/transcripts.py", "from ingest import extraction"),
        ("ingest/writing.py", "from ingest import tasks"),
        ("recall/block.py", "from recall import pipeline"),
        ("recall/pipeline.py", "from recall import golden"),
    ],
)
def test_an_upward_import_inside_an_app_fails_its_own_layers_contract(code_copy, tmp_path, module, line):
    [inside] = [c for c in LINTER["contracts"] if c.get("containers") == [module.split("/")[0]]]
    broken = tmp_path / "broken"
    shutil.copytree(code_copy, broken)
    target = broken / module
    target.write_text(target.read_text() + f"\n\ndef _breaks_the_contract():\n    {line}  # noqa\n")
    result = lint_imports(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    broken_section = " ".join(result.stdout.split("Broken contracts", 1)[1].split())
    assert inside["name"] in broken_section
    assert LAYERS_CONTRACT not in broken_section  # within one app: the apps' contract holds


def test_the_upward_imports_tried_cover_every_floor():
    floor_of = {app: depth for depth, floor in enumerate(floors()) for app in floor}
    tried = {(module.split("/")[0], line.split()[1].split(".")[0]) for module, line in UPWARD}
    for low, high in tried:
        assert floor_of[high] <= floor_of[low], (low, high)  # each is upward, or sideways on a floor
    assert {low for low, _ in tried} == set(PACKAGES) - {"config"}  # every app but the top one


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    modules = sorted(m for m in graph.modules if ".migrations" not in m)
    known = set(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module) & known):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_round_a_cycle_not_even_from_inside_a_function(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
    allowed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["memoryui"]["allowed_import_cycles"]
    cycles = [cycle for cycle in import_cycles(graph) if cycle not in [sorted(c["modules"]) for c in allowed]]
    assert cycles == []


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text("def later():\n    from cyclic import a  # noqa\n")
    (package / "c.py").write_text("from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic", cache_dir=None)
    assert import_cycles(graph) == [["cyclic.a", "cyclic.b"]]


def source_lines(app: str) -> int:
    """An app's lines of Python, its migrations aside."""
    return sum(
        len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    )


def test_no_app_holds_more_than_a_third_of_the_source_and_the_store_at_most_thirty_percent():
    lines = {app: source_lines(app) for app in PACKAGES}
    total = sum(lines.values())
    shares = {app: round(count / total, 3) for app, count in lines.items()}
    assert total > 20_000  # the count sees the code (tests and benches aside)
    assert max(shares.values()) <= 0.35, shares
    assert shares["memoryui"] <= 0.30, shares
