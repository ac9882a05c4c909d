"""A search hit's match in words (recall.explain.match_why): a label and one sentence saying which
retriever found it and how well, from the candidate's JSON alone. No database, no index."""

from __future__ import annotations

from recall.explain import explain, match_why
from searchindex.answerability import label
from searchindex.fusion import Candidate, RetrievalSettings

SETTINGS = RetrievalSettings()  # strong margin +0.085, strong coverage 60%, agreement +0.040 and 10%


def hit(*, margin: float | None, coverage: float | None, refused: str | None = None) -> dict:
    """A search result as Found.to_dict() gives it, labelled by the real answerability rule."""
    anchor = 0.8
    candidate = Candidate(
        id="m1",
        vector_rank=1 if margin is not None else None,
        vector_score=anchor + margin if margin is not None else None,
        bm25_rank=1 if coverage is not None else None,
        bm25_score=3.0 if coverage is not None else None,
        bm25_coverage=coverage,
        contributions={"vector": 0.3, "bm25": 0.2},
        fused=0.5,
        adjustments={},
        score=0.5,
        anchor=anchor if margin is not None else None,
    )
    level, reasons = label(candidate, SETTINGS, refused=refused)
    return {"label": level, "vector_margin": candidate.margin, "bm25_coverage": coverage, "reasons": reasons}


def test_meaning_and_keywords_agreeing_are_a_strong_match_found_by_both():
    match = match_why(hit(margin=0.05, coverage=0.4))
    assert (match.label, match.title) == ("strong", "Strong match")
    assert match.why == (
        "Found by both meaning and keywords: it is close to the query in meaning, "
        "and it holds 40% of the query's words (by rarity)."
    )


def test_a_strong_match_by_meaning_alone_says_it_shares_no_words():
    match = match_why(hit(margin=0.12, coverage=None))
    assert match.title == "Strong match"
    assert match.why == (
        "Found by meaning only: it is very close to the query in meaning, and it shares no words with the query."
    )


def test_a_strong_match_by_keywords_alone_says_the_vector_search_missed_it():
    match = match_why(hit(margin=None, coverage=0.85))
    assert match.title == "Strong match"
    assert match.why == (
        "Found by keywords only: it holds 85% of the query's words (by rarity), and the vector search did not find it."
    )


def test_a_weak_match_by_meaning_only_is_worded_as_a_little_closer_than_unrelated_text():
    match = match_why(hit(margin=0.02, coverage=None))
    assert (match.label, match.title) == ("weak", "Weak match")
    assert match.why == (
        "Found by meaning only: it is a little closer to the query in meaning than unrelated text, "
        "and it shares no words with the query."
    )


def test_a_weak_match_by_keywords_says_its_meaning_is_no_closer_than_unrelated_text():
    match = match_why(hit(margin=-0.01, coverage=0.2))
    assert match.title == "Weak match"
    assert match.why == (
        "Found by keywords only: it holds 20% of the query's words (by rarity), "
        "and its meaning is no closer to the query than unrelated text."
    )


def test_a_query_whose_meaning_does_not_count_says_why():
    refused = "an identifier is matched by its characters, not by meaning"
    match = match_why(hit(margin=0.2, coverage=1.0, refused=refused))
    assert match.title == "Strong match"
    assert match.why == (
        "Found by keywords only: it holds all of the query's words, "
        f"and its closeness in meaning does not count here ({refused})."
    )


def test_below_the_floor_reads_as_the_playground_reads_it():
    searched = hit(margin=-0.002, coverage=None)
    match = match_why(searched)
    assert (match.label, match.title) == ("below_floor", "Below the floor")
    assert match.why == (
        "Too weak a match: neither retriever found it close enough — its meaning is no closer to the query "
        "than unrelated text, and it shares no words with the query."
    )
    # The same candidate in a recall (its label's reasons under label_reasons) reads the same.
    recalled = {
        "id": "m1",
        "decision": "below_floor",
        "label": "below_floor",
        "label_reasons": searched["reasons"],
        "vector_margin": searched["vector_margin"],
        "bm25_coverage": None,
    }
    [row] = explain({"candidates": [recalled], "answer": {"answered": True}}).groups[0].rows
    assert row.why == match.why == match_why(recalled, "label_reasons").why


def test_a_hit_from_stored_words_alone_reads_the_same():
    stored = hit(margin=0.05, coverage=0.4)
    as_text = dict(stored, reasons=[str(reason) for reason in stored["reasons"]])  # no codes: read back from words
    assert match_why(as_text) == match_why(stored)


def test_an_unjudged_hit_says_so_and_still_says_what_found_it():
    match = match_why({"label": "", "vector_margin": 0.03, "bm25_coverage": 0.5, "reasons": []})
    assert (match.label, match.title) == ("", "Not judged")
    assert match.why.startswith("Found by both meaning and keywords: ")
