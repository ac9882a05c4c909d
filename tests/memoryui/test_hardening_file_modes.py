"""Everything in the data dir is private, not only the database: the vector index (chromadb's
`chroma.sqlite3`, which holds every memory's text, and its segment files), the BM25 index's whoosh
segments and the caches (jieba's dictionary, the embedder's anchors) are open to their owner alone
(files 0600, directories 0700), however the libraries create them and whatever the umask the
process was started with.

A fresh data dir is migrated, written to and searched by `manage.py` in subprocesses started under
the usual umask (022), the way `make run`, a worker and the commands are; every file and directory
under it is then looked at. An older install's files are tightened when a process starts.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from memoryui import security

ROOT = Path(__file__).resolve().parents[2]

# Writes memories (their index syncs run inline: both indexes are built), one in Chinese (jieba's
# cache), then searches (the anchors' cache), and lists the mode of everything in the data dir.
BUILD_AND_LIST = """
import json, os
from django.conf import settings
from ingest import writing
from searchindex.search import search

writing.write(actor="test", scope="agent:main", kind="fact", text="Runs 1000 RTX 4070s in an IDC.")
writing.write(actor="test", scope="agent:other", kind="preference", text="用户喜欢简短的回答,不要客套话。")
assert search("RTX 4070", scopes=["agent:main"]).results
modes = {}
for root, dirs, files in os.walk(settings.DATA_DIR):
    for name in [".", *dirs, *files]:
        path = os.path.normpath(os.path.join(root, name))
        modes[os.path.relpath(path, settings.DATA_DIR)] = oct(os.lstat(path).st_mode & 0o777)
print(json.dumps(modes))
"""


def manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_", "CELERY_", "DATABASE_"))}
    env |= {"MEMORYUI_DATA_DIR": str(data_dir), "CELERY_TASK_ALWAYS_EAGER": "1"}
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        umask=0o022,  # as a shell starts it, whatever this test process's umask is
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_indexes_and_caches_a_fresh_data_dir_gets_are_private(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)

    manage(data_dir, "migrate", "--no-input", "-v", "0")
    modes = json.loads(manage(data_dir, "shell", "-c", BUILD_AND_LIST).stdout.strip().splitlines()[-1])

    directories = {path for path in modes if (data_dir / path).is_dir()}
    assert {"index", "index/chroma", "index/bm25", "cache"} <= directories, sorted(modes)
    files = set(modes) - directories
    assert "index/chroma/chroma.sqlite3" in files and "cache/jieba.cache" in files, sorted(modes)
    assert any(path.startswith("index/bm25/") for path in files), sorted(modes)
    assert any(path.startswith("cache/anchors-") for path in files), sorted(modes)
    assert {path: mode for path, mode in modes.items() if path in directories and mode != "0o700"} == {}
    # 0600, or 0700 for a file its library creates asking for 0777 (whoosh's MAIN_WRITELOCK): none of
    # them is open to anyone but the owner.
    assert {path: mode for path, mode in modes.items() if path in files and mode not in ("0o600", "0o700")} == {}
    assert {path for path, mode in modes.items() if mode == "0o700" and path in files} <= {"index/bm25/MAIN_WRITELOCK"}


def test_an_older_installs_indexes_and_caches_are_tightened(tmp_path):
    index = tmp_path / "index" / "chroma" / "0b5d-segment"
    index.mkdir(parents=True)
    (tmp_path / "cache").mkdir()
    for path in (tmp_path / "index/chroma/chroma.sqlite3", index / "data_level0.bin", tmp_path / "cache/jieba.cache"):
        path.write_bytes(b"")
        path.chmod(0o644)
    for path in (tmp_path, tmp_path / "index", tmp_path / "index/chroma", index, tmp_path / "cache"):
        path.chmod(0o755)
    (tmp_path / "elsewhere").symlink_to("/etc/hostname")  # a link is left alone, never followed

    security.private_data_dir(tmp_path)

    modes = {
        str(path.relative_to(tmp_path)): stat.S_IMODE(path.lstat().st_mode)
        for path in [tmp_path, *tmp_path.rglob("*")]
        if not path.is_symlink()
    }
    assert modes == {
        ".": 0o700,
        "index": 0o700,
        "index/chroma": 0o700,
        "index/chroma/0b5d-segment": 0o700,
        "index/chroma/chroma.sqlite3": 0o600,
        "index/chroma/0b5d-segment/data_level0.bin": 0o600,
        "cache": 0o700,
        "cache/jieba.cache": 0o600,
    }
    assert stat.S_IMODE(os.stat("/etc/hostname").st_mode) & 0o044
