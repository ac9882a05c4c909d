"""memoryui: inspect, repair and tune the long-term memory of AI agents."""

# The release, as pyproject.toml's [project] version says (a test holds them equal): the MCP server
# names it in its serverInfo, the API in its schema. Set before the Celery app is imported, which
# loads the settings, which read it.
__version__ = "0.1.0"

from memoryui.celery import app as celery_app

__all__ = ["__version__", "celery_app"]
