"""A report's JSON shape is its dataclass fields: one declarative `to_dict()` for results and reports.

A command's `--json`, a task's result, the API and the pages show the same dicts; `plain()` builds
them from the dataclass's fields (`dataclasses.fields`, in declaration order), so a report is
defined once:

    @dataclass
    class UndoReport(Report):
        batch: str
        restored: int = 0
        memories: list[str] = field(default_factory=list, metadata={"convert": len})  # shown as a count

Field metadata says how a field is shown:

    "report": False      leave it out
    "key": "name"        show it under another key
    "omit_empty": True   leave it out when it is None, "" or an empty list, tuple or dict
    "convert": function  show function(value) instead (a count, rounded digits, keys)

`report_properties = ("margin",)` on the class adds those properties after the fields, in that order.

Values become JSON-ready: dataclasses recursively (one with a `to_dict()` of its own, a hand-written
shape, by that), lists and tuples as lists, dicts with their values converted, UUIDs as str,
datetimes and dates in ISO 8601, model instances as their pk (str); numbers, Decimals, str, bool
and None as they are.

Standard library and Django only: searchindex and recall use it too.
"""

from __future__ import annotations

import uuid
from dataclasses import fields, is_dataclass
from datetime import date
from typing import Any, ClassVar

from django.db import models


def plain(value: Any) -> Any:
    """`value` as JSON-ready values; a dataclass instance by its fields, even one with a `to_dict()`."""
    if is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    return _value(value)


def _fields(report: Any) -> dict:
    data = {}
    for spec in fields(report):
        meta = spec.metadata
        value = getattr(report, spec.name)
        if meta.get("report", True) is False or (meta.get("omit_empty") and _empty(value)):
            continue
        if "convert" in meta:
            value = meta["convert"](value)
        data[meta.get("key", spec.name)] = _value(value)
    for name in getattr(report, "report_properties", ()):
        data[name] = _value(getattr(report, name))
    return data


def _value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_dict() if hasattr(value, "to_dict") else _fields(value)
    if isinstance(value, list | tuple):
        return [_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _value(item) for key, item in value.items()}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    if isinstance(value, models.Model):
        return str(value.pk)
    return value


def rounded(value: float | None, digits: int = 4) -> float | None:
    """`value` rounded to `digits` places, as reports show scores and times; None stays None (a
    signal that is missing, e.g. no vector rank)."""
    return None if value is None else round(value, digits)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


class Report:
    """Mixin for a report dataclass: `to_dict()` is `plain(self)`."""

    report_properties: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict:
        return plain(self)
