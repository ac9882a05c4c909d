from __future__ import annotations

import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from config.server import ChunkedBodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# A body sent in chunks is read (up to the body limit) rather than taken for an empty one.
application = ChunkedBodies(get_wsgi_application(), settings.DATA_UPLOAD_MAX_MEMORY_SIZE)

from config.readiness import require_store  # noqa: E402 - after the app registry is ready

require_store()  # the dashboard does not start on a database that holds no store
