"""A report's JSON is its fields: `plain()` reads the dataclass, its field metadata and its
`report_properties`, and turns every value into something json.dumps takes as it is."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from memoryui.models import Memory, Transcript
from memoryui.reports import Report, plain

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


@dataclass
class Step(Report):
    name: str
    when: datetime | None = None


@dataclass
class Ingested(Report):
    transcript: Transcript = field(metadata={"key": "transcript_id"})
    added: int
    unchanged: int
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list, metadata={"report": False})
    detail: str = field(default="", metadata={"omit_empty": True})
    memories: list[str] = field(default_factory=list, metadata={"convert": len})

    report_properties = ("messages", "first_step")

    @property
    def messages(self) -> int:
        return self.added + self.unchanged

    @property
    def first_step(self) -> Step | None:
        return self.steps[0] if self.steps else None


@dataclass
class Shaped:
    """A dataclass with a hand-written shape of its own."""

    value: int

    def to_dict(self) -> dict:
        return {"shaped": self.value * 2}


def test_fields_come_in_declaration_order_then_the_properties_in_the_order_named():
    report = Ingested(Transcript(id=TID, scope="agent:main"), added=3, unchanged=2, steps=[Step("a", WHEN)])

    assert list(report.to_dict()) == [
        "transcript_id",
        "added",
        "unchanged",
        "steps",
        "memories",
        "messages",
        "first_step",
    ]


def test_metadata_renames_leaves_out_and_converts_a_field():
    report = Ingested(Transcript(id=TID, scope="agent:main"), 3, 2, notes=["secret"], memories=["x", "y"])

    data = report.to_dict()

    assert data["transcript_id"] == str(TID) and "transcript" not in data  # a model instance is its pk
    assert "notes" not in data
    assert data["memories"] == 2
    assert "detail" not in data
    assert Ingested(Transcript(id=TID), 0, 0, detail="why").to_dict()["detail"] == "why"


def test_omit_empty_leaves_out_none_and_empty_values_but_keeps_zero_and_false():
    @dataclass
    class Optional(Report):
        none: str | None = field(default=None, metadata={"omit_empty": True})
        blank: str = field(default="", metadata={"omit_empty": True})
        nothing: list = field(default_factory=list, metadata={"omit_empty": True})
        zero: float = field(default=0.0, metadata={"omit_empty": True})
        false: bool = field(default=False, metadata={"omit_empty": True})

    assert Optional().to_dict() == {"zero": 0.0, "false": False}


def test_nested_dataclasses_lists_tuples_and_dicts_are_converted_all_the_way_down():
    report = Ingested(Transcript(id=TID), 1, 0, steps=[Step("a", WHEN), Step("b")])

    data = report.to_dict()

    assert data["steps"] == [{"name": "a", "when": "2024-05-06T07:08:09+00:00"}, {"name": "b", "when": None}]
    assert data["first_step"] == {"name": "a", "when": "2024-05-06T07:08:09+00:00"}
    assert plain({"ids": (TID, TID), "by": {"day": date(2024, 5, 6)}}) == {
        "ids": [str(TID), str(TID)],
        "by": {"day": "2024-05-06"},
    }
    json.dumps(data)  # nothing left that JSON cannot hold


def test_uuids_datetimes_models_and_numbers():
    memory = Memory(id=TID, scope="agent:main", text="Prefers tabs.")

    assert plain(TID) == str(TID)
    assert plain(WHEN) == "2024-05-06T07:08:09+00:00"
    assert plain(memory) == str(TID)
    assert plain(Decimal("1.50")) == Decimal("1.50")
    assert plain([1, 2.5, True, None, "x"]) == [1, 2.5, True, None, "x"]


def test_a_nested_value_with_a_hand_written_to_dict_keeps_its_shape_but_plain_reads_the_fields():
    assert plain([Shaped(2)]) == [{"shaped": 4}]
    assert plain(Shaped(2)) == {"value": 2}  # what a hand-written to_dict builds on


def test_the_result_is_a_copy_that_can_be_changed_without_touching_the_report():
    step = Step("a")
    report = Ingested(Transcript(id=TID), 1, 0, steps=[step])

    data = report.to_dict()
    data["steps"].append("extra")
    data["steps"][0]["name"] = "changed"

    assert report.steps == [step] and step.name == "a"
