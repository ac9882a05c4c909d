"""Every recall knob: retrieval's (searchindex.fusion.RetrievalSettings) and the pipeline's.

A recall profile (recall.models.RecallProfile) stores them as one flat JSON object; this module
reads and checks them without loading the pipeline, the embedder or the indexes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from recall import heuristic
from recall.block import BlockKnobs
from searchindex.fusion import RETIRED_KNOBS, RetrievalSettings, SettingsError

_RECALL_KNOBS = {
    # knob: (type, low, high)
    "candidates": (int, 1, 100),
    "selector_timeout_ms": (int, 100, 60_000),
    "weight_retrieval": (float, 0.0, 10.0),
    "weight_exact": (float, 0.0, 10.0),
    "weight_substring": (float, 0.0, 10.0),
    "weight_tags": (float, 0.0, 10.0),
    "weight_text": (float, 0.0, 10.0),
    "weight_answer_type": (float, 0.0, 1.0),
    # The block's size (recall.block): shares of the best score and a cosine similarity; above 1 a
    # cut lets nothing past the first memory, and a redundancy above 1 drops nothing as redundant.
    "block_cut": (float, 0.0, 1.01),
    "block_weak_cut": (float, 0.0, 1.01),
    "block_gap": (float, 0.01, 1.0),
    "block_redundancy": (float, 0.5, 1.01),
}


@dataclass(frozen=True)
class RecallSettings:
    """Every recall knob: retrieval's (searchindex.fusion.RetrievalSettings) and the pipeline's.

    A recall profile stores them as one flat JSON object (`to_dict`/`from_dict`).
    """

    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    candidates: int = 20  # the best floor-passing candidates the selector and the heuristic see
    selector: bool = True  # ask the model selector when an LLM is configured
    selector_timeout_ms: int | None = None  # None: MEMORYUI_SELECTOR_TIMEOUT_MS
    weight_retrieval: float = 1.0
    weight_exact: float = 1.0
    weight_substring: float = 0.6
    weight_tags: float = 0.3
    weight_text: float = 0.2
    weight_answer_type: float = heuristic.Weights.answer_type
    block_cut: float = BlockKnobs.cut
    block_weak_cut: float = BlockKnobs.weak_cut
    block_gap: float = BlockKnobs.gap
    block_redundancy: float = BlockKnobs.redundancy
    schema_markers: tuple[str, ...] | None = None  # None: recall.toolfilter's defaults
    durable_markers: tuple[str, ...] | None = None

    @property
    def weights(self) -> heuristic.Weights:
        return heuristic.Weights(
            retrieval=self.weight_retrieval,
            exact=self.weight_exact,
            substring=self.weight_substring,
            tags=self.weight_tags,
            text=self.weight_text,
            answer_type=self.weight_answer_type,
        )

    @property
    def block(self) -> BlockKnobs:
        return BlockKnobs(
            cut=self.block_cut, weak_cut=self.block_weak_cut, gap=self.block_gap, redundancy=self.block_redundancy
        )

    def to_dict(self) -> dict:
        data = self.retrieval.to_dict()
        for knob in fields(self):
            if knob.name != "retrieval":
                value = getattr(self, knob.name)
                data[knob.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data) -> RecallSettings:
        """Settings from a profile's JSON; missing knobs take their defaults, unknown ones are errors."""
        if not isinstance(data, dict):
            raise SettingsError({"settings": [f"must be a JSON object, got {type(data).__name__}"]})
        retrieval_names = {knob.name for knob in fields(RetrievalSettings)}
        errors: dict[str, list[str]] = {}
        retrieval = RetrievalSettings()
        try:
            passed_on = retrieval_names | RETIRED_KNOBS
            retrieval = RetrievalSettings.from_dict({k: v for k, v in data.items() if k in passed_on})
        except SettingsError as exc:
            errors.update(exc.errors)
        own = {knob.name for knob in fields(cls)} - {"retrieval"}
        values: dict = {}
        for key, value in data.items():
            if key in retrieval_names or key in RETIRED_KNOBS:
                continue
            if key not in own:
                known = sorted(retrieval_names | own)
                errors.setdefault(str(key), []).append("is not a recall knob; known knobs: " + ", ".join(known))
                continue
            problem, value = _check_knob(key, value)
            if problem:
                errors.setdefault(key, []).append(problem)
            else:
                values[key] = value
        if errors:
            raise SettingsError(errors)
        return cls(retrieval=retrieval, **values)


def _check_knob(key: str, value) -> tuple[str | None, object]:
    if key == "selector":
        return (None, value) if isinstance(value, bool) else ("must be true or false", value)
    if key in ("schema_markers", "durable_markers"):
        if value is None:
            return None, None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return "must be a list of words or phrases (or null for the built-in list)", value
        cleaned = tuple(dict.fromkeys(" ".join(item.split()) for item in value if item.strip()))
        return (None, cleaned) if cleaned else ("must hold at least one marker (or be null)", value)
    if key == "selector_timeout_ms" and value is None:
        return None, None
    kind, low, high = _RECALL_KNOBS[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, got {value!r}", value
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            return f"must be a whole number, got {value!r}", value
        value = int(value)
    if not low <= value <= high:
        return f"must be between {low:g} and {high:g}, got {value!r}", value
    return None, float(value) if kind is float else value
