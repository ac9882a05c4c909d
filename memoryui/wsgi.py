from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()

from memoryui.readiness import require_store  # noqa: E402 - after the app registry is ready

require_store()  # the dashboard does not start on a database that holds no store
