"""A checkout of another commit for a benchmark's baseline: the same measurement run with its code."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def checkout(ref: str, under: Path) -> Path:
    """A detached git worktree of `ref` at under/<sha>, made once and reused."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = under / sha[:12]
    if not (tree / ".git").exists():
        subprocess.run(["git", "worktree", "add", "--detach", "--force", str(tree), sha], cwd=ROOT, check=True)
    return tree
