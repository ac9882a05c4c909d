"""The memory store's models, one module per concern; Django finds them all through this package.

    memory        Memory, MemoryEvent (the append-only history), DistinctPair
    outbox        IndexOutbox, PendingVector, IndexCheck, LexicalEntry: the search indexes' bookkeeping
    tokens        ApiToken
    transcripts   Transcript, Message
    taskrun       TaskRun

The store imports neither the search indexes nor recall (pyproject.toml's import contracts).
"""

from __future__ import annotations

from memoryui.models.memory import (
    UNIT_INTERVAL,
    ConflictError,
    DistinctPair,
    Memory,
    MemoryEvent,
    MemoryManager,
    MemoryQuerySet,
)
from memoryui.models.outbox import (
    IndexCheck,
    IndexOutbox,
    LexicalEntry,
    PendingVector,
    announcements_held,
    index_entries_due,
    outbox_committed,
    queue_index_sync,
)
from memoryui.models.taskrun import TaskRun
from memoryui.models.tokens import TOKEN_PREFIX, ApiToken, ApiTokenQuerySet, hash_token
from memoryui.models.transcripts import Message, Transcript

__all__ = [
    "TOKEN_PREFIX",
    "UNIT_INTERVAL",
    "ApiToken",
    "ApiTokenQuerySet",
    "ConflictError",
    "DistinctPair",
    "IndexCheck",
    "IndexOutbox",
    "LexicalEntry",
    "Memory",
    "MemoryEvent",
    "MemoryManager",
    "MemoryQuerySet",
    "Message",
    "PendingVector",
    "TaskRun",
    "Transcript",
    "announcements_held",
    "hash_token",
    "index_entries_due",
    "outbox_committed",
    "queue_index_sync",
]
