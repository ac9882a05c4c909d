#!/usr/bin/env python
"""Django's command-line utility for memoryui."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    from config.readiness import refuse_command_without_store

    refuse_command_without_store(sys.argv)  # a mistyped MEMORYUI_DATA_DIR: say so, not "no such table"
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
