"""memoryui: inspect, repair and tune the long-term memory of AI agents."""

from memoryui.celery import app as celery_app

__all__ = ["celery_app"]
