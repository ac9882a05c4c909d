"""The project documents itself: docs/architecture.md is the design document the code cites.

A citation such as `docs/architecture.md "Write path"` (in a module, a test, a template, a comment or a
docstring) must name a `##` or `###` heading of it, and no file may cite a design document that
lives outside the repository (the DESIGN.md the code once cited: `DESIGN.md`, `DESIGN "…"`,
`DESIGN's …`), which a reader of the repository cannot open. The files are those git lists:
tracked, and new ones not ignored; CHANGELOG.md is history and may name what was cited then.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

TEXT_SUFFIXES = (".py", ".html", ".toml", ".md")
SKIPPED_DIRS = ("tests/clients/", ".venv/")
SKIPPED_NAMES = ("CHANGELOG.md",)

# The outside document, however it was cited: "DESIGN.md", 'DESIGN "Write path"', "DESIGN's".
OUTSIDE = re.compile(r"\bDESIGN\b")
# A citation of a section; its name may wrap onto the next line, of a comment too.
CITATION = re.compile(r'docs/architecture\.md,?[\s#]*\\?"([^"\\]{1,80})\\?"')
HEADING = re.compile(r"^#{2,3}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def documented_files() -> list[str]:
    """The text files the checks read: Python, HTML, TOML, Markdown, Makefile and Procfiles."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files to check are those git lists")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode("utf-8", "surrogateescape")
    files = []
    for path in sorted(set(filter(None, listed.split("\0")))):
        name = path.rsplit("/", 1)[-1]
        if path.startswith(SKIPPED_DIRS) or "/.venv/" in path or name in SKIPPED_NAMES:
            continue
        if not (path.endswith(TEXT_SUFFIXES) or name == "Makefile" or name.startswith("Procfile")):
            continue
        if (ROOT / path).is_file():  # listed, but deleted in the working tree
            files.append(path)
    return files


def read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8", errors="replace")


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def section_name(raw: str) -> str:
    """A cited name as one line: a comment's `#` and the indentation of a wrapped line dropped."""
    return " ".join(re.sub(r"\n[ \t]*#?", " ", raw).split())


def headings() -> set[str]:
    return {match.group(1) for match in HEADING.finditer(ARCHITECTURE.read_text(encoding="utf-8"))}


def test_the_files_checked_include_the_code_and_the_architecture():
    files = documented_files()

    assert {"ingest/writing.py", "recall/pipeline.py", "README.md", "pyproject.toml", "Makefile"} <= set(files)
    assert ARCHITECTURE.is_file()
    assert {"Floors", "Write path", "Read path: recall", "Error shape"} <= headings()


def test_nothing_cites_a_design_document_outside_the_repository():
    found = []
    for path in documented_files():
        if path == THIS:
            continue
        text = read(path)
        for match in OUTSIDE.finditer(text):
            line = text.splitlines()[line_of(text, match.start()) - 1].strip()
            found.append(f"{path}:{line_of(text, match.start())}: {line[:120]}")

    outside = "cite docs/architecture.md instead of the document outside the repository:"
    assert not found, "\n".join([outside, *found])


def test_every_citation_of_the_architecture_names_one_of_its_sections():
    sections = headings()
    citations, unknown = 0, []
    for path in documented_files():
        text = read(path)
        for match in CITATION.finditer(text):
            citations += 1
            name = section_name(match.group(1))
            if name not in sections:
                unknown.append(f'{path}:{line_of(text, match.start())}: "{name}"')

    assert citations >= 30, "the citations in the code were not found: is the pattern still right?"
    known = "no such section in docs/architecture.md, whose ## and ### headings are: " + ", ".join(sorted(sections))
    assert not unknown, "\n".join([known, *unknown])


# --- every environment variable in one table ------------------------------------------------------

APPS = ("config", "memoryui", "searchindex", "ingest", "hygiene", "recall", "api", "web", "mcpserver")
# How the code reads a variable: settings' env_str/env_int/env_float/env_bool, os.environ and getenv;
# and any name of memoryui's own in quotes (a command keeps one in a constant).
READ = re.compile(
    r"""(?:env_(?:str|int|float|bool)|environ\.get|environ\.setdefault|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|["'](MEMORYUI_[A-Z0-9_]+)["']"""
)
# Not memoryui's to document: the settings module every Django process names, what the embedders
# set for their libraries (one thread, never a download), and a WSGI request's header.
NOT_OURS = {
    "DJANGO_SETTINGS_MODULE",
    "OMP_NUM_THREADS",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HTTP_TRANSFER_ENCODING",
}


def configuration_table() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for line in table for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split(" | ")[0])}


def variables_read() -> dict[str, str]:
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            for names in READ.findall(path.read_text(encoding="utf-8")):
                for name in filter(None, names):
                    found.setdefault(name, path.relative_to(ROOT).as_posix())
    return {name: where for name, where in found.items() if name not in NOT_OURS}


def test_every_environment_variable_the_code_reads_is_in_the_configuration_table():
    read = variables_read()
    assert len(read) >= 40  # the reader finds them: settings alone reads more than forty
    missing = {name: where for name, where in read.items() if name not in configuration_table()}
    assert missing == {}, "add a row to README's Configuration table for each"


def test_the_configuration_table_names_no_variable_the_code_does_not_read():
    assert configuration_table() - set(variables_read()) == set()
