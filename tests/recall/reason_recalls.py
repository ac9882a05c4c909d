"""A small store and a set of recalls over it that, together, give most kinds of reason the pipeline
writes: the active-tool filter, the block's cuts, required words, the selector's picks and failures,
an unanswered query, a short candidate list, exact keys and names, tags, a question asking for a time,
`select:`. tests/recall/fixtures/trace_before_reason_codes.json holds these recalls as traces saved
before reasons carried codes (text only); test_reason_codes.py runs them again and compares."""

from __future__ import annotations

import json
from pathlib import Path

from recall.knobs import RecallSettings
from recall.models import RecallTrace
from recall.pipeline import recall
from recall.selector import SelectorConfig
from searchindex.defaults import active_defaults
from tests.fakes.openai_server import FakeOpenAIServer

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "trace_before_reason_codes.json"

SCHEMA = "Parameter schema and usage reference for article-list-query: page_size int ≤ 50, query string, locale enum."
ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team, page #ata-oncall."
SCHEMA_ZH = "article-list-query 的调用格式：先传 query 再传 page_size。"
GOTCHA = "Gotcha for article-list-query: always pass locale=zh or it silently returns empty."
PHONE = "The user's phone number is 18600000000."
RELEASES = "Releases go out on Thursdays after 14:00; nothing ships on Fridays."
DEPLOY = "Deploy with deploy-tool from the ops host; it needs the release tag."
MEMORIES = [
    (SCHEMA, {"kind": "procedure"}),
    (ESCALATION, {"kind": "procedure"}),
    (SCHEMA_ZH, {"kind": "procedure"}),
    (GOTCHA, {"kind": "procedure"}),
    (PHONE, {"kind": "entity", "entity_key": "phone:18600000000"}),
    (RELEASES, {"kind": "procedure"}),
    ("Staging runs on k3s with three nodes.", {"kind": "fact"}),
    ("用户喜欢简洁的回答，不要长篇大论。", {"kind": "preference"}),
    (DEPLOY, {"kind": "procedure", "metadata": {"tags": ["deploy"], "tools": ["deploy-tool"]}}),
]
QUERY = "how do I call article-list-query"


def write_store(write) -> dict[str, str]:
    """The memories written and indexed: text → id."""
    return {text: str(write(text, **fields).pk) for text, fields in MEMORIES}


def picks(*starts: str):
    """A chat reply selecting the candidates whose first line starts with each of `starts`."""

    def reply(body: dict) -> str:
        request = json.loads(body["messages"][-1]["content"])
        chosen = []
        for start in starts:
            chosen += [c["id"] for c in request["candidates"] if c["first_line"].startswith(start)]
        return json.dumps({"selected": [{"id": pk, "reason": "relevant"} for pk in chosen]})

    return reply


def config(server: FakeOpenAIServer, timeout_ms: int = 20_000) -> SelectorConfig:
    """A generous budget where the test is not about the budget: a busy machine must not time it out."""
    return SelectorConfig(base_url=server.base_url, model="fake-selector", api_key="test", timeout_ms=timeout_ms)


def _settings(**knobs) -> RecallSettings:
    return RecallSettings.from_dict({**active_defaults(), **knobs})


def run_recalls(ids: dict[str, str]) -> dict[str, dict]:
    """Every recall of the set, by name, as the fields of a trace (RecallTrace.fields_of)."""
    tool = "mcp__ata__article-list-query"
    runs = {
        "active_tool_limit_1": lambda _: recall(QUERY, scope="agent:main", tools=[tool], limit=1, selector_config=None),
        "active_tool": lambda _: recall(
            QUERY, scope="agent:main", tools=["ata::article-list-query"], selector_config=None
        ),
        "required_word": lambda _: recall(f"{QUERY} +locale", scope="agent:main", selector_config=None),
        "exact_key": lambda _: recall("18600000000", scope="agent:main", selector_config=None),
        "exact_name_and_tag": lambda _: recall("deploy-tool", scope="agent:main", selector_config=None),
        "asks_for_a_time": lambda _: recall("when do releases go out", scope="agent:main", selector_config=None),
        "few_candidates": lambda _: recall(
            QUERY, scope="agent:main", settings=_settings(candidates=2), selector_config=None
        ),
        "selector_off": lambda _: recall(QUERY, scope="agent:main", settings=_settings(selector=False)),
        "select": lambda _: recall(f"select:{ids[GOTCHA]},{ids[PHONE]}", scope="agent:main"),
        "selector": lambda server: _with_replies(
            server, [picks("Parameter schema", "Escalation")], QUERY, tools=["ata::article-list-query"]
        ),
        "selector_missing_required": lambda server: _with_replies(
            server, [picks("Escalation", "Gotcha")], f"{QUERY} +locale", tools=[tool]
        ),
        "selector_invalid_json": lambda server: _with_replies(server, ["Sure! The escalation note."], QUERY),
        "unanswered": lambda server: recall(
            "quantum entanglement of photons", scope="agent:main", selector_config=config(server)
        ),
    }
    traces = {}
    for name, run in runs.items():
        with FakeOpenAIServer(stall_seconds=10) as server:
            traces[name] = RecallTrace.fields_of(run(server))
    return traces


def _with_replies(server: FakeOpenAIServer, replies: list, query: str, *, tools=()):
    server.chat_replies = list(replies)
    return recall(query, scope="agent:main", tools=list(tools), selector_config=config(server))
