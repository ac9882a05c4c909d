"""Shared fixtures. Who is who (roles: memoryui.roles):

- alice is the operator: a superuser, so an admin, who signs in to the dashboard and sees every scope.
- bob is a signed-in user in no group: a viewer, who reads everything but changes nothing.
- erin is an editor: she changes memories and runs the hygiene, but mints no unscoped token and
  changes no recall profile.
- the agent token belongs to alice and sees every scope (an agent using memoryui as its store).
- mallory is an editor with a write token for agent:other only; she must never see agent:main.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client, override_settings

from config.celery import app
from ingest import writing
from memoryui import roles
from memoryui.models import ApiToken, Memory
from searchindex import indexes as search_indexes
from searchindex.exact import EXACT
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.chroma_server import ChromaServer

# --- spreading the suite over cores (pytest-xdist, Makefile's `--dist loadgroup`) -------------------


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """A test file's tests run on one worker, so its module-scoped servers start once; and the tests
    that start whole stacks of processes (tests/integration: `make run`, workers, brokers) run one
    after another, on one worker, so no two stacks fight over the cores and time out."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group("integration" if path.startswith("tests/integration/") else path))
    own_but_shared = [item.nodeid for item in items if _own_database_but_uses_the_suites(item)]
    if own_but_shared:
        raise pytest.UsageError(
            "marked own_database but using the suite's database (CI's PostgreSQL pass would never run "
            "them on PostgreSQL): " + ", ".join(own_but_shared)
        )


SUITE_DATABASE_FIXTURES = {
    "db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server",
}  # fmt: skip


def _own_database_but_uses_the_suites(item) -> bool:
    """A test marked own_database runs on a store it makes; one reaching the suite's database (the
    django_db mark, a database fixture, the live server) must not carry the mark."""
    if item.get_closest_marker("own_database") is None:
        return False
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(item.get_closest_marker("django_db") or fixtures & SUITE_DATABASE_FIXTURES)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_superuser("alice", "alice@example.com", "alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1")


@pytest.fixture
def erin(django_user_model):
    user = django_user_model.objects.create_user("erin", "erin@example.com", "erin-password-1")
    roles.set_role(user, roles.Role.EDITOR)
    return user


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(alice) -> Client:
    return signed_in(alice)


@pytest.fixture
def bob_client(bob) -> Client:
    return signed_in(bob)


@pytest.fixture
def erin_client(erin) -> Client:
    return signed_in(erin)


@pytest.fixture
def agent_token(alice) -> str:
    _, raw = ApiToken.issue(user=alice, name="agent")
    return raw


@pytest.fixture
def mallory_token(django_user_model) -> str:
    mallory = django_user_model.objects.create_user("mallory", "mallory@example.com", "mallory-password-1")
    roles.set_role(mallory, roles.Role.EDITOR)
    _, raw = ApiToken.issue(user=mallory, name="mallory", scopes=["agent:other"], access=ApiToken.Access.WRITE)
    return raw


@pytest.fixture
def make_memory():
    """Write a memory through the real write path (validation, placement, dedup)."""

    def make(text: str = "The user prefers short answers.", **fields) -> Memory:
        fields.setdefault("scope", "agent:main")
        fields.setdefault("kind", "preference")
        memory, _ = writing.write(actor="test", text=text, **fields)
        return memory

    return make


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Real hashers cost ~0.3 s a user; tests that create users don't test hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True, scope="session")
def _a_cache_of_the_runs_own(tmp_path_factory):
    """The default cache is files in the data dir, which every process of a store shares (the rate
    limits count there): a test run gets a directory of its own, so two runs at once never count
    against each other's limits or clear each other's counts."""
    cache = settings.CACHES["default"]
    if cache["BACKEND"] != "api.throttling.FileCache":
        yield  # a Redis named by MEMORYUI_CACHE_URL: the run's to choose
        return
    with override_settings(CACHES={"default": {**cache, "LOCATION": str(tmp_path_factory.mktemp("cache"))}}):
        yield


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Throttle counts live in the cache, and user and token ids are reused after a rollback:
    # one test's requests must not count against the next one's limits.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _exact_matrices_of_the_tests_own():
    """A scope's matrix for exact vector search is read by a background thread: each test ends with
    that thread idle and no matrix of its indexes left to the next test."""
    yield
    EXACT.clear()


@pytest.fixture(autouse=True)
def _semantic_dedup_only_with_real_indexes(request, settings):
    """Dedup layer 3 embeds every write and asks the vector index: tests that go through the
    real indexes (the `indexes` fixture) keep it on; the rest test layers 1-2 and run fast."""
    if "indexes" not in request.fixturenames:
        settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = None


@pytest.fixture(autouse=True, scope="session")
def _tasks_inline_and_indexes_in_a_temp_dir(tmp_path_factory):
    """Unit tests run Celery tasks inline (integration tests start a real worker), and the
    search indexes live in a temporary directory, never in the developer's data dir."""
    app.conf.task_always_eager = True
    settings.MEMORYUI_INDEX_DIR = tmp_path_factory.mktemp("index")
    search_indexes.close_indexes()
    yield
    search_indexes.close_indexes()


@pytest.fixture
def indexes(settings, tmp_path):
    """Fresh, empty indexes in this test's own directory."""
    settings.MEMORYUI_INDEX_DIR = tmp_path / "index"
    settings.CHROMA_URL = ""
    search_indexes.close_indexes()
    yield tmp_path / "index"
    search_indexes.close_indexes()


@pytest.fixture
def chroma_server(tmp_path):
    """A real chromadb server of this test's own (`chroma run`, data under tmp_path), which the
    test may stop, kill, freeze and restart at the same URL; stopped at the end."""
    with ChromaServer(tmp_path / "chroma-server") as server:
        yield server


@pytest.fixture
def server_indexes(indexes, settings, chroma_server):
    """Fresh indexes (see `indexes`) whose vector index is `chroma_server`, through CHROMA_URL."""
    settings.CHROMA_URL = chroma_server.url
    search_indexes.close_indexes()
    yield chroma_server
    search_indexes.close_indexes()


@pytest.fixture
def write(make_memory, django_capture_on_commit_callbacks):
    """Write a memory and run what happens after commit (the index sync task, inline)."""

    def run(text: str, **fields) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            return make_memory(text, **fields)

    return run


@pytest.fixture
def l1_server(settings):
    """Our OpenAI-compatible server as the configured LLM, with budgets long enough that only a
    stall meant by the test runs into them (the L1 extractor's, and the fake's own stall)."""
    with FakeOpenAIServer(stall_seconds=10) as fake:
        settings.MEMORYUI_LLM_BASE_URL, settings.MEMORYUI_LLM_MODEL = fake.base_url, "fake-extractor"
        settings.MEMORYUI_L1_TIMEOUT_MS = 20_000
        yield fake
