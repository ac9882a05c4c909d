"""Markdown memory files with YAML front matter, one memory per file, as coding agents keep
auto-memory (Claude Code's memory directory: `name`, `description`, `type` among user, feedback,
project, reference; the body is the memory; MEMORY.md an index linking the files).

Reading maps the agent's `type` to our kinds (`TYPE_KINDS`; tier and importance then follow from
memoryui.rules as for any write). A `memoryui:` mapping in the front matter (what `render` writes)
carries every field of ours, so an export of ours reads back exactly. Front matter keys of the
agent's own that we have no field for (`originSessionId`, `related`, …) are kept in
`metadata.origin.front_matter`, and an export writes them back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import yaml
from yaml.composer import ComposerError

from ingest.memoryfiles import Candidate, Parsed, SourceFile, decode, stable_id
from memoryui import untrusted
from memoryui.rules import Kind

FORMAT = "markdown-dir"
INDEX_NAME = "MEMORY.md"
READ_KEYS = ("name", "title", "description", "type", "memoryui")  # the front matter keys read as fields

# The agent's `type` → (our kind, the confidence it is written with). user: who the user is (role,
# knowledge, identity): an entity, core and pinned. feedback: how the user wants the work done, said
# by the user: a stable explicit preference, core and pinned. project: where work stands. reference:
# where things are and how to do them: a fact, or a procedure when the body is a list of steps.
# Anything else (or no type) is a note: peripheral, with a TTL, for a person to sort out.
TYPE_KINDS: dict[str, tuple[str, float]] = {
    "user": (Kind.ENTITY, 0.9),
    "feedback": (Kind.PREFERENCE, 0.9),
    "project": (Kind.PROJECT_STATE, 0.7),
    "reference": (Kind.FACT, 0.7),
}
UNKNOWN_TYPE = (Kind.NOTE, 0.7)
# Our kind → the agent's type, for an export (the `memoryui:` block keeps the kind itself).
KIND_TYPES = {
    Kind.ENTITY: "user",
    Kind.REMEMBER: "user",
    Kind.PREFERENCE: "feedback",
    Kind.PROJECT_STATE: "project",
    Kind.SUMMARY: "project",
    Kind.FACT: "reference",
    Kind.PROCEDURE: "reference",
    Kind.RELATIONSHIP: "reference",
    Kind.NOTE: "reference",
}

# The front matter's mapping and its `memoryui:` block hold the metadata: two levels more than the
# API's JSON limit, so that metadata may nest as deep here as there (memoryui.rules checks it).
MAX_YAML_DEPTH = untrusted.MAX_JSON_DEPTH + 2


class FrontMatterLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing what would make reading the front matter blow up: nesting
    past MAX_YAML_DEPTH levels (PyYAML composes a node a level deeper in its own recursion, and
    raised RecursionError past about a thousand) and aliases (`*name`: one node read again
    wherever it is named, so a few lines can stand for more values than memory holds)."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, "an alias (*name) is not read in front matter", event.start_mark)
        if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent) and self.depth >= MAX_YAML_DEPTH:
            raise ComposerError(None, None, f"is nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)(?:^|\n)---[ \t]*(?:\r?\n|\Z)", re.S)
_STEP = re.compile(r"^\s*\d+[.)]\s+\S", re.M)
_INDEX_LINE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+.*\[[^\]]*\]\([^)]+\.md(?:#[^)]*)?\)")


def kind_for(type_: object, body: str) -> tuple[str, float]:
    """Our kind and confidence for the agent's `type` (TYPE_KINDS); a reference that lists two
    or more numbered steps is a procedure."""
    kind, confidence = TYPE_KINDS.get(str(type_ or "").strip().lower(), UNKNOWN_TYPE)
    if kind == Kind.FACT and len(_STEP.findall(body)) >= 2:
        kind = Kind.PROCEDURE
    return kind, confidence


def is_index(name: str, text: str) -> bool:
    """An index only links other memory files: MEMORY.md without front matter, or any file whose
    every line (headings and blank lines aside) is a list item linking a .md file."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if name.rsplit("/", 1)[-1].upper() == INDEX_NAME.upper():
        return True
    return bool(lines) and all(_INDEX_LINE.match(line) for line in lines)


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """(the YAML between the --- lines or None, the body, the line the body starts on)."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return None, text, 1
    return match.group("yaml"), text[match.end() :], text[: match.end()].count("\n") + 1


def parse(files: Iterable[SourceFile], *, scope: str | None) -> Parsed:
    """Read every .md file: one memory each; an index is skipped; a bad file is an error naming it."""
    parsed = Parsed()
    for source in sorted(files, key=lambda f: f.name):
        if not source.name.lower().endswith(".md"):
            parsed.skip(source.name, 1, "not a .md file")
            continue
        text = decode(source, parsed)
        if text is not None:
            _parse_file(source.name, text, scope, parsed)
    return parsed


def _parse_file(name: str, text: str, scope: str | None, parsed: Parsed) -> None:
    raw, body, body_line = split_front_matter(text)
    if raw is None:
        if is_index(name, text):
            parsed.skip(name, 1, "an index that only links other memory files, not a memory")
        elif text.lstrip().startswith("---"):
            parsed.error(name, 1, "front matter is not closed: no --- line after it")
        else:
            parsed.error(name, 1, "no front matter: a memory file starts with --- name, description, type ---")
        return
    try:
        front = yaml.load(raw, Loader=FrontMatterLoader)  # a SafeLoader, guarded
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # the YAML starts on the file's second line
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        parsed.error(name, line, f"front matter is not valid YAML: {problem}")
        return
    if front is None:
        front = {}
    if not isinstance(front, dict):
        parsed.error(name, 2, "front matter must be a mapping of name, description, type")
        return
    front = _json_value(front)  # YAML's dates, sets, bytes and .inf as JSON holds them, wherever they are
    body = body.strip()
    ours = front.get("memoryui")
    if ours is not None:
        if not isinstance(ours, dict):
            parsed.error(name, 2, "memoryui: must be a mapping of memory fields")
            return
        record = {key: value for key, value in ours.items() if key != "text"}
        record["text"] = body
        if scope is not None:
            record["scope"] = scope
        if record.get("scope") is None:
            parsed.error(name, 2, "no scope: the front matter names none; choose one (--scope)")
            return
        record.setdefault("source", "import")
        if record.get("kind") is None:  # a hand-written block: the agent's type says the kind
            record["kind"], confidence = kind_for(front.get("type"), body)
            record.setdefault("confidence", confidence)
        if record.get("id") is None:
            record["id"] = str(stable_id(FORMAT, str(record["scope"]), name))
        parsed.candidates.append(Candidate(name, body_line, record))
        return
    if scope is None:
        parsed.error(name, 1, "no scope: choose the scope these memories belong to (--scope)")
        return
    title = front.get("name", front.get("title"))
    description = front.get("description")
    type_ = front.get("type")
    text = body or str(description or "").strip()
    kind, confidence = kind_for(type_, text)
    origin = {"format": FORMAT, "file": name, "name": title, "description": description, "type": type_}
    origin = {key: _plain(value) for key, value in origin.items() if value not in (None, "")}
    if others := {key: _json_value(value) for key, value in front.items() if key not in READ_KEYS}:
        origin["front_matter"] = others
    record = {
        "id": str(stable_id(FORMAT, scope, name)),
        "scope": scope,
        "kind": kind,
        "text": text,
        "confidence": confidence,
        "source": "import",
        "metadata": {"origin": origin},
    }
    parsed.candidates.append(Candidate(name, body_line, record))


def _plain(value: object) -> object:
    """A front matter value as JSON holds it (YAML reads dates and times as objects, and .inf
    and .nan as numbers JSON has none of)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, str | int | float | bool) else str(value)


def _json_value(value: object) -> object:
    """A front matter value of any shape as JSON holds it: lists and mappings kept, the rest plain."""
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    return value if value is None else _plain(value)


# --- export --------------------------------------------------------------------------------

_SLUG = re.compile(r"[^a-z0-9]+")


def file_name(record: dict) -> str:
    """The file an exported memory goes to: a slug of its name (or kind) and its id's first 8."""
    origin = (record.get("metadata") or {}).get("origin") or {}
    label = origin.get("name") if isinstance(origin, dict) else None
    slug = _SLUG.sub("-", str(label or record["kind"]).lower()).strip("-")[:40].strip("-") or record["kind"]
    return f"{slug}-{record['id'][:8]}.md"


def front_matter(record: dict) -> dict:
    """The front matter of an exported memory: name, description and type for the agent (the
    original ones when it came from such a file and its kind still matches its type), every field
    of ours under `memoryui:`."""
    origin = (record.get("metadata") or {}).get("origin") or {}
    if not isinstance(origin, dict):
        origin = {}
    first_line = record["text"].strip().splitlines()[0]
    type_ = origin.get("type")
    if type_ is None or kind_for(type_, record["text"])[0] != record["kind"]:
        type_ = KIND_TYPES.get(record["kind"], "reference")
    others = origin.get("front_matter") if isinstance(origin.get("front_matter"), dict) else {}
    return {
        "name": str(origin.get("name") or first_line[:60]),
        "description": str(origin.get("description") or first_line[:150]),
        "type": str(type_),
        **{key: value for key, value in others.items() if key not in READ_KEYS},
        "memoryui": {key: record[key] for key in sorted(record) if key != "text"},
    }


def render(record: dict) -> str:
    """One memory as a markdown memory file: front matter, then the text as the body."""
    yaml_text = yaml.safe_dump(
        front_matter(record), allow_unicode=True, sort_keys=False, default_flow_style=False, width=1000
    )
    return f"---\n{yaml_text}---\n\n{record['text']}\n"


def render_index(entries: list[tuple[str, dict]]) -> str:
    """MEMORY.md: one line per exported file, linking it by name, with its description."""
    lines = ["# Memory index", ""]
    for name, record in entries:
        front = front_matter(record)
        name_, description = (" ".join(front[key].split()) for key in ("name", "description"))
        lines.append(f"- [{name_}]({name}) — {description}")
    return "\n".join(lines) + "\n"


def export_files(records: list[dict]) -> dict[str, str]:
    """Every memory's file and the index, by file name."""
    files = {file_name(record): render(record) for record in records}
    files[INDEX_NAME] = render_index([(file_name(record), record) for record in records])
    return files
