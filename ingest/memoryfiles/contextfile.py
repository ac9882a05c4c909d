"""The "added memories" sections of agents' context files: gemini-cli's and qwen-code's
save_memory tool appends each fact as a bullet under `## Gemini Added Memories` /
`## Qwen Added Memories` of GEMINI.md / QWEN.md; Claude Code's `#` shortcut adds bullets to a
CLAUDE.md. Each bullet is one memory; everything outside those sections (the project's
instructions) is not memory and is not imported.

A section is one whose heading is "<anything> Added Memories", "Memories" or "Memory" (any case),
and it runs to the next heading of the same or a higher level. Fenced code blocks are skipped.
A bullet is something the user asked the agent to remember: kind `remember`, confidence 0.95 (an
explicit request), so working tier by the rules; when it states one entity the write path's L0 rules
recognise (a phone number, an e-mail, a birthday, a name…), it carries that entity key and so goes to
the core tier, as an explicit remember of an entity does (docs/architecture.md "Tier and importance").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ingest.extraction.l0_entities import find_entities
from ingest.extraction.sentences import prepare, split_sentences
from ingest.memoryfiles import Candidate, Parsed, SourceFile, decode, stable_id
from memoryui import rules

FORMAT = "context-file"
CONTEXT_FILE_NAMES = ("CLAUDE.md", "CLAUDE.local.md", "GEMINI.md", "QWEN.md", "AGENTS.md")
EXPLICIT = 0.95  # the user asked for it to be remembered (as L0's explicit remember)

_HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<title>.*?)\s*#*\s*$")
_MEMORY_SECTION = re.compile(r"^(?:.*\s)?added\s+memories$|^memor(?:y|ies)$", re.I)
_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+]|\d+[.)])\s+(?P<text>.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def has_memory_section(text: str) -> bool:
    """Whether the text has a heading that opens an "added memories" section."""
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and _MEMORY_SECTION.match(heading.group("title")):
            return True
    return False


def bullets(text: str) -> list[tuple[int, str, str]]:
    """(line number, heading, bullet text) of every bullet in the memory sections; a bullet's
    indented continuation lines are joined to it with a space."""
    found: list[tuple[int, str, str]] = []
    section: tuple[int, str] | None = None  # (level, title) of the memory section we are in
    current: list | None = None  # [line, heading, parts, indent]
    in_fence = False

    def close() -> None:
        nonlocal current
        if current is not None:
            found.append((current[0], current[1], " ".join(current[2])))
            current = None

    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            close()
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            level, title = len(heading.group("level")), heading.group("title")
            if _MEMORY_SECTION.match(title):
                section = (level, title)
            elif section is not None and level <= section[0]:
                section = None
            continue
        if section is None:
            continue
        bullet = _BULLET.match(line)
        if bullet and (current is None or len(bullet.group("indent")) <= current[3]):
            close()
            current = [number, section[1], [bullet.group("text").strip()], len(bullet.group("indent"))]
        elif current is not None and line.strip() and len(line) - len(line.lstrip()) > current[3]:
            current[2].append(line.strip())  # a continuation, or a nested item of this bullet
        else:
            close()
    close()
    return found


def entity_key(text: str) -> str | None:
    """The entity key when L0's entity rules find exactly one entity in the text."""
    keys = {
        fact.entity_key
        for sentence in split_sentences(prepare(text))
        for fact, _, _ in find_entities(sentence)
        if fact.entity_key
    }
    return keys.pop() if len(keys) == 1 else None


def parse(files: Iterable[SourceFile], *, scope: str | None) -> Parsed:
    parsed = Parsed()
    for source in sorted(files, key=lambda f: f.name):
        text = decode(source, parsed)
        if text is None:
            continue
        found = bullets(text)
        if not found:
            reason = (
                "no bullets in its added-memories section"
                if has_memory_section(text)
                else ("no added-memories section (a heading such as “## Gemini Added Memories”)")
            )
            parsed.skip(source.name, 1, reason)
            continue
        if scope is None:
            parsed.error(source.name, found[0][0], "no scope: choose the scope these memories belong to (--scope)")
            continue
        seen: dict[str, int] = {}
        for line, heading, bullet in found:
            normalized = rules.normalize_text(bullet)
            if normalized in seen:
                parsed.skip(source.name, line, f"the same bullet as line {seen[normalized]}")
                continue
            seen[normalized] = line
            record = {
                "id": str(stable_id(FORMAT, scope, f"{source.name}\n{normalized}")),
                "scope": scope,
                "kind": "remember",
                "text": bullet,
                "confidence": EXPLICIT,
                "source": "import",
                "metadata": {"origin": {"format": FORMAT, "file": source.name, "section": heading}},
            }
            if key := entity_key(bullet):
                record["entity_key"] = key
            parsed.candidates.append(Candidate(source.name, line, record))
    return parsed
