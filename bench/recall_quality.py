"""Benchmark: the recall block an agent reads, scored on every labelled set, beside a baseline commit.

Search quality (bench/retrieval_quality.py) asks where the right memory ranks; this asks what the
agent is handed. Every query of every labelled set (bench/data/README.md) runs through
`recall.pipeline.recall`, the whole pipeline with the default profile, and the block it returns is
scored against the set's labels (a query's right memories are its `relevant` keys; a conversation
question's are its evidence):

- block precision: of all the memories handed over, the share that are right (a memory handed
  over for a query with no answer is wrong);
- block recall: of a query's right memories, the share handed over, averaged over the queries
  that have an answer;
- silence: of the queries with no answer, the share handed nothing;
- mean block size: memories handed over per query, over all queries.

Printed per set, then per set and query kind. Two paths:

- `heuristic`: no model selector (what the default install gives);
- `selector`: the model selector, against a real model when MEMORYUI_LLM_BASE_URL and
  MEMORYUI_LLM_MODEL are set, otherwise against the fake OpenAI-compatible server of the tests
  (tests/fakes/openai_server.py) answering with the first `limit` candidates it was shown, in
  order: that measures the mechanics (the request, the parse, the post-filter), not a model.

`--baseline REF` runs the same sets with REF's code (a git worktree under var/bench/baseline/)
in the same run and prints both side by side with the acceptance checks of the block: precision
at least doubled, recall at most 0.03 lower, silence no lower. Each commit has its own stores
(var/bench/recall_quality/<set>/ of its tree), written through its own write path and indexed
with the configured embedder, cached until the set or the embedder changes; a child process per
set and path runs the queries with that commit's code on its path.

    .venv/bin/python bench/recall_quality.py [--sets retrieval,multilingual,conversation]
        [--paths heuristic,selector] [--limit 5] [--baseline REF] [--settings JSON] [--json]

`--settings` tries recall knobs (flat JSON, e.g. '{"block_cut": 0.8}') on the code under test.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "bench" / "data"
SETS = {
    "retrieval": DATA_DIR / "retrieval_set.json",
    "multilingual": DATA_DIR / "multilingual_set.json",
    "conversation": DATA_DIR / "conversation_set.json",
}
PATHS = ("heuristic", "selector")
# What the block must do against the baseline (issue acceptance, also the product's intent).
PRECISION_GAIN, RECALL_DROP = 2.0, 0.03


# --- the child: one set, one path, one commit's code ---------------------------------------------


def collect(name: str, path: str, limit: int, settings_json: str) -> dict:
    """Load the set's store (cached) and recall every query; each query's block, as ids.

    Runs with the code of the tree first on sys.path, so only what every commit of the recall
    pipeline has is used: `recall(query, scope=, limit=, settings=, selector_config=)`, the
    result's `selected` and `candidates`, and recall.golden's labelled-set loader."""
    import django

    django.setup()
    from recall.golden import labelled_id, read_labelled
    from recall.knobs import RecallSettings
    from recall.pipeline import recall
    from searchindex import indexes as search_indexes
    from searchindex.defaults import active_defaults

    data = json.loads(SETS[name].read_text(encoding="utf-8"))
    memories, queries = read_labelled(data)
    embedder = _labelled_store().ensure(name, SETS[name], len(memories))
    settings = RecallSettings.from_dict({**active_defaults(), **json.loads(settings_json or "{}")})
    selector_config, server = None, None
    if path == "selector":
        selector_config, server = _selector(limit)
    runs = []
    try:
        for q in queries:
            result = recall(
                q["query"], scope=q["scope"], limit=limit, settings=settings, selector_config=selector_config
            )
            runs.append(
                {
                    "id": q["id"],
                    "type": q["type"],
                    "relevant": [str(labelled_id(key)) for key in q["relevant"]],
                    "block": [rc.id for rc in result.selected],
                    "mode": result.mode,
                    "fallback_reason": result.fallback_reason,
                    "ms": round(result.timings_ms.get("total", 0.0), 2),
                }
            )
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        search_indexes.close_indexes()
    return {"set": name, "path": path, "embedder": embedder, "runs": runs}


def _labelled_store():
    """bench/labelled_store.py, by its path: the tree first on sys.path may be another commit's."""
    spec = importlib.util.spec_from_file_location("labelled_store", Path(__file__).with_name("labelled_store.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _selector(limit: int):
    """(selector config, fake server or None): the configured model, or the tests' fake one."""
    from recall.selector import SelectorConfig

    configured = SelectorConfig.from_settings(None)
    if configured is not None:
        return configured, None
    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer()
    server.__enter__()

    def first_candidates(body: dict) -> str:
        request = json.loads(body["messages"][-1]["content"])
        picks = [{"id": c["id"], "reason": "listed first"} for c in request["candidates"][: request["limit"]]]
        return json.dumps({"selected": picks})

    server.chat_reply = first_candidates
    config = SelectorConfig(base_url=server.base_url, model="fake-selector", api_key="bench", timeout_ms=20_000)
    return config, server


def collect_in_child(tree: Path, name: str, path: str, limit: int, settings_json: str) -> dict:
    """One set and path recalled with `tree`'s code, in a child process with that tree's store."""
    data_dir = tree / "var" / "bench" / "recall_quality" / name
    data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        MEMORYUI_DATA_DIR=str(data_dir),
        # The Django project's settings: config.settings, or memoryui.settings in a tree from before
        # the apps were split (a baseline commit's).
        DJANGO_SETTINGS_MODULE="config.settings" if (tree / "config" / "settings.py").exists() else "memoryui.settings",
        CELERY_TASK_ALWAYS_EAGER="1",
        MEMORYUI_LEXICAL="whoosh",
        PYTHONPATH=str(tree),
    )
    env.pop("DATABASE_URL", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    if path == "heuristic":
        env.update(MEMORYUI_LLM_BASE_URL="", MEMORYUI_LLM_MODEL="")
    command = [sys.executable, __file__, "--collect", name, "--code", str(tree), "--paths", path, "--limit", str(limit)]
    if settings_json:
        command += ["--settings", settings_json]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    if done.returncode:
        raise SystemExit(f"recalling {name} ({path}) with the code at {tree} failed")
    return json.loads(done.stdout)


# --- the parent: score and print ------------------------------------------------------------------


def metrics(runs: list[dict]) -> dict:
    handed = right = 0
    recall_sum, answerable, unanswerable, silent = 0.0, 0, 0, 0
    for run in runs:
        relevant, given = set(run["relevant"]), run["block"]
        handed += len(given)
        right += len(relevant & set(given))
        if relevant:
            answerable += 1
            recall_sum += len(relevant & set(given)) / len(relevant)
        else:
            unanswerable += 1
            silent += not given
    return {
        "precision": right / handed if handed else None,
        "recall": recall_sum / answerable if answerable else None,
        "silence": silent / unanswerable if unanswerable else None,
        "size": handed / len(runs) if runs else 0.0,
        "queries": len(runs),
        "answerable": answerable,
    }


def report(collected: dict) -> dict:
    runs = collected["runs"]
    by_kind = defaultdict(list)
    for run in runs:
        by_kind[run["type"]].append(run)
    modes = defaultdict(int)
    for run in runs:
        why = (run["fallback_reason"] or "").split(":")[0]  # the reason's kind, without its details
        modes[f"{run['mode']} ({why})" if why else run["mode"]] += 1
    return {
        "all": metrics(runs),
        "by_kind": {kind: metrics(group) for kind, group in sorted(by_kind.items())},
        "modes": dict(modes),
    }


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def checks(new: dict, old: dict) -> list[str]:
    """The acceptance of the block against the baseline, one line per rule."""
    lines = []
    p, p0 = new["precision"], old["precision"]
    if p is not None and p0:
        lines.append(
            f"precision ×{p / p0:.2f} (needs ×{PRECISION_GAIN:g}): {'met' if p >= PRECISION_GAIN * p0 else 'NOT met'}"
        )
    r, r0 = new["recall"], old["recall"]
    if r is not None and r0 is not None:
        lines.append(
            f"recall {r - r0:+.3f} (at most -{RECALL_DROP:g}): {'met' if r >= r0 - RECALL_DROP else 'NOT met'}"
        )
    s, s0 = new["silence"], old["silence"]
    if s is not None and s0 is not None:
        lines.append(f"silence {s - s0:+.3f} (no lower): {'met' if s >= s0 - 1e-9 else 'NOT met'}")
    return lines


def print_tables(reports: dict, baseline: dict | None, label: str, baseline_label: str) -> None:
    for path, sets in reports.items():
        print(f"\n## {path} path\n")
        if baseline:
            print(f"| set | block precision {baseline_label} → {label} | block recall | silence | mean block size |")
            print("|---|---|---|---|---|")
        else:
            print("| set | block precision | block recall | silence | mean block size |")
            print("|---|---|---|---|---|")
        for name, rep in sets.items():
            m = rep["all"]
            if baseline:
                b = baseline[path][name]["all"]
                cells = [f"{_cell(b[k])} → {_cell(m[k])}" for k in ("precision", "recall", "silence")]
                cells.append(f"{b['size']:.2f} → {m['size']:.2f}")
            else:
                cells = [_cell(m["precision"]), _cell(m["recall"]), _cell(m["silence"]), f"{m['size']:.2f}"]
            print(f"| {name} ({m['queries']} queries) | " + " | ".join(cells) + " |")
        if baseline:
            print()
            for name, rep in sets.items():
                print(f"- {name}: " + "; ".join(checks(rep["all"], baseline[path][name]["all"])))
        for name, rep in sets.items():
            print(f"\n### {name}, {path} path, by query kind\n")
            head = "| kind | precision | recall | silence | size |"
            print(head + "\n|---|---|---|---|---|")
            for kind, m in rep["by_kind"].items():
                if baseline:
                    b = baseline[path][name]["by_kind"][kind]
                    cells = [f"{_cell(b[k])} → {_cell(m[k])}" for k in ("precision", "recall", "silence")]
                    cells.append(f"{b['size']:.2f} → {m['size']:.2f}")
                else:
                    cells = [_cell(m["precision"]), _cell(m["recall"]), _cell(m["silence"]), f"{m['size']:.2f}"]
                print(f"| {kind} ({m['queries']}) | " + " | ".join(cells) + " |")
            modes = ", ".join(f"{mode}: {n}" for mode, n in rep["modes"].items())
            print(f"\nanswered by: {modes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--paths", default="heuristic,selector", help="comma-separated: " + ", ".join(PATHS))
    parser.add_argument("--limit", type=int, default=5, help="the recall limit (a ceiling, 1..20)")
    parser.add_argument("--baseline", metavar="REF", help="also run REF's code on the same sets, side by side")
    parser.add_argument("--settings", metavar="JSON", default="", help="recall knobs to try on the code under test")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--collect", metavar="SET", help=argparse.SUPPRESS)
    parser.add_argument("--code", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collect:
        print(json.dumps(collect(args.collect, args.paths, args.limit, args.settings)))
        return
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [n for n in names if n not in SETS] + [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown set(s) or path(s): {', '.join(unknown)}")
    if args.settings:
        try:
            json.loads(args.settings)
        except ValueError as exc:
            parser.error(f"--settings: {exc}")
    reports = {p: {n: report(collect_in_child(ROOT, n, p, args.limit, args.settings)) for n in names} for p in paths}
    baseline = None
    if args.baseline:
        sys.path.insert(0, str(ROOT))
        from bench import worktree

        tree = worktree.checkout(args.baseline, ROOT / "var" / "bench" / "baseline")
        baseline = {p: {n: report(collect_in_child(tree, n, p, args.limit, "")) for n in names} for p in paths}
    if args.json:
        print(json.dumps({"limit": args.limit, "settings": args.settings, "reports": reports, "baseline": baseline}))
        return
    label = _describe("HEAD") + (" with " + args.settings if args.settings else "")
    baseline_label = _describe(args.baseline) if args.baseline else ""
    print(f"recall blocks at limit {args.limit}: {label}" + (f", baseline {baseline_label}" if baseline else ""))
    print_tables(reports, baseline, "now", "baseline")


def _describe(ref: str) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=False)
    dirty = ""
    if ref == "HEAD":
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        dirty = " (with uncommitted changes)" if status.strip() else ""
    return (done.stdout.strip() or ref) + dirty


if __name__ == "__main__":
    # That commit's code first on the path (a child), in place of bench/, whose mcp.py would shadow
    # the mcp package.
    sys.path[0] = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(ROOT)
    main()
