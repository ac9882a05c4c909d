"""Forms of the recall pages: the playground, profiles (one field per knob), golden sets and queries."""

from __future__ import annotations

import re
from dataclasses import fields

from django import forms

from memoryui import memory_ids, rules
from recall import golden
from recall.knobs import RecallSettings
from recall.models import DEFAULT_PROFILE, GoldenQuery, GoldenSet, RecallProfile
from recall.toolfilter import DEFAULT_DURABLE_MARKERS, DEFAULT_SCHEMA_MARKERS
from searchindex.fusion import FUSIONS, RetrievalSettings, SettingsError
from searchindex.search import MAX_QUERY_CHARS

_SPLIT_RE = re.compile(r"[,\n]+")


def split_list(value: str) -> list[str]:
    return [part.strip() for part in _SPLIT_RE.split(value or "") if part.strip()]


def _scope(value: str) -> str:
    try:
        return rules.normalize_scope(value)
    except rules.ScopeError as exc:
        raise forms.ValidationError(str(exc)) from None


def profile_choices() -> list[tuple[str, str]]:
    RecallProfile.objects.resolve(DEFAULT_PROFILE)  # exists from the first visit on
    return [(name, name) for name in RecallProfile.objects.values_list("name", flat=True)]


class PlaygroundForm(forms.Form):
    """One recall to try: the query parameters of the playground page."""

    q = forms.CharField(
        label="Query",
        max_length=MAX_QUERY_CHARS * 10,
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "what the agent's turn is about", "autocomplete": "off"}
        ),
        help_text="select:<id>,<id> picks memories; +word makes a word required",
    )
    scope = forms.CharField(
        max_length=rules.SCOPE_MAX_LENGTH,
        widget=forms.TextInput(attrs={"list": "scope-options", "autocomplete": "off", "placeholder": "agent:main"}),
    )
    tools = forms.CharField(
        label="Recent tools",
        required=False,
        widget=forms.TextInput(
            attrs={"placeholder": "mcp__ata__article-list-query, web::fetch", "autocomplete": "off"}
        ),
        help_text="comma-separated, most recent last",
    )
    profile = forms.ChoiceField(choices=(), required=False)
    limit = forms.IntegerField(required=False, widget=forms.NumberInput(attrs={"placeholder": "5"}))
    cut = forms.FloatField(
        label="Cut",
        required=False,
        min_value=0.0,
        max_value=1.01,
        widget=forms.NumberInput(attrs={"step": "0.05", "placeholder": "0.7"}),
        help_text="try another block cut: a memory after the first is handed over at this share of the best "
        "score (blank: the profile's)",
    )
    why = forms.CharField(
        label="Why not recalled?",
        required=False,
        max_length=64,
        widget=forms.TextInput(attrs={"placeholder": "a memory id, e.g. 37ddb874", "autocomplete": "off"}),
        help_text=f"a memory's id, or its first {memory_ids.SHORT_ID_MIN} characters as the pages show them",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["profile"].choices = profile_choices()

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])

    def clean_tools(self) -> list[str]:
        return split_list(self.cleaned_data["tools"])

    def clean_why(self) -> str:
        """The full id of the memory asked about, from its full or short id; tombstoned memories and
        those of other scopes too: being one is the answer."""
        typed = self.cleaned_data["why"].strip()
        if not typed:
            return ""
        try:
            return str(memory_ids.resolve(typed))
        except memory_ids.MemoryIdError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_profile(self) -> RecallProfile:
        return RecallProfile.objects.resolve(self.cleaned_data.get("profile") or DEFAULT_PROFILE)


# --- profiles -----------------------------------------------------------------------------------

# Each knob in words (profiles are still tuned by name: the form shows the name under the label),
# with what it does, in groups by the stage of recall it tunes.
KNOBS: dict[str, tuple[str, str]] = {
    "vector_k": ("Vector candidates", "candidates taken from the vector index"),
    "bm25_k": ("BM25 candidates", "candidates taken from the BM25 index"),
    "fusion": ("Fusion", "cc: convex combination of normalised scores; rrf: reciprocal rank fusion"),
    "cc_vector_weight": ("Vector weight (cc)", "the vector margin's weight (BM25 gets 1 minus it)"),
    "cc_min_coverage": (
        "Least BM25 coverage that counts (cc)",
        "coverage up to this adds nothing (a shared name is no evidence)",
    ),
    "rrf_k": ("RRF k", "the k of w/(k + rank)"),
    "rrf_vector_weight": ("Vector weight (rrf)", "the vector list's weight"),
    "rrf_bm25_weight": ("BM25 weight (rrf)", "the BM25 list's weight"),
    "limit": ("Memories recalled", "at most this many, 1..20"),
    "tier_core_bonus": ("Core tier bonus", "added to a core memory's fused score"),
    "tier_working_bonus": ("Working tier bonus", "added to a working memory's fused score"),
    "tier_peripheral_bonus": (
        "Peripheral tier bonus",
        "added to a peripheral memory's fused score (negative: a penalty)",
    ),
    "pinned_bonus": ("Pinned bonus", "added to a pinned memory's fused score"),
    "importance_weight": ("Importance weight", "× the memory's importance (0..1), added to the fused score"),
    "recency_weight": (
        "Recency weight",
        "× 0.5^(age / half-life), added to the fused score; pinned memories do not decay",
    ),
    "recency_half_life_days": ("Recency half-life (days)", "the age at which the recency bonus is halved"),
    "strong_margin": (
        "Strong: vector margin",
        "strong when the vector similarity stands this far above the query's anchor…",
    ),
    "strong_coverage": ("Strong: BM25 coverage", "…or BM25 holds this share of the query's terms (by rarity)…"),
    "agree_margin": ("Strong together: vector margin", "…or both retrievers agree: this margin…"),
    "agree_coverage": ("Strong together: BM25 coverage", "…together with this coverage"),
    "weak_margin": ("Weak: vector margin", "weak (shown with an answered query) from this margin…"),
    "weak_coverage": ("Weak: BM25 coverage", "…or this coverage; below both: under the floor"),
    "candidates": ("Candidates scored", "the strong and weak candidates the selector and the heuristic see"),
    "selector": ("Model selector", "ask the model selector when an LLM is configured"),
    "selector_timeout_ms": (
        "Selector budget (ms)",
        "past it the heuristic answers (blank: MEMORYUI_SELECTOR_TIMEOUT_MS)",
    ),
    "weight_retrieval": ("Retrieval weight", "× the candidate's fused score over the best one's"),
    "weight_exact": ("Exact match weight", "the query is the memory's key or a tool name it records"),
    "weight_substring": ("Whole-query weight", "the whole query occurs in the text"),
    "weight_tags": ("Tag weight", "a query term is one of the memory's tags"),
    "weight_text": ("Text coverage weight", "× the share of the query's terms in the text"),
    "weight_answer_type": (
        "Answer type kept",
        "the share of its score a memory keeps when the query asks when or how many and it names no time or number "
        "(1: off)",
    ),
    "block_cut": ("Cut", "a memory after the first is handed over at this share of the best score or more"),
    "block_weak_cut": ("Weak match cut", "a weak match after the first needs this share of the best score"),
    "block_gap": (
        "Gap that ends the block",
        "a drop of this share of the best score from one memory to the next ends it (1: off)",
    ),
    "block_redundancy": (
        "Says the same",
        "a memory this similar (cosine of the stored vectors) to one already handed over is left out (above 1: off)",
    ),
    "schema_markers": ("Schema-ish markers", "one per line (blank: the built-in list)"),
    "durable_markers": ("Durable markers", "one per line (blank: the built-in list)"),
}
KNOB_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Candidates and fusion", "what each index contributes, and how their scores are combined",
     ("vector_k", "bm25_k", "fusion", "cc_vector_weight", "cc_min_coverage", "rrf_k", "rrf_vector_weight",
      "rrf_bm25_weight")),
    ("Rerank", "small bonuses added to the fused score",
     ("tier_core_bonus", "tier_working_bonus", "tier_peripheral_bonus", "pinned_bonus", "importance_weight",
      "recency_weight", "recency_half_life_days")),
    ("Relevance floor", "when a candidate is a strong or weak match; a query with no strong match is not answered",
     ("strong_margin", "strong_coverage", "agree_margin", "agree_coverage", "weak_margin", "weak_coverage")),
    ("What recall returns", "", ("limit", "candidates", "selector", "selector_timeout_ms")),
    ("Heuristic weights", "how the heuristic scores the candidates that cleared the floor",
     ("weight_retrieval", "weight_exact", "weight_substring", "weight_tags", "weight_text", "weight_answer_type")),
    ("Block size", "the limit is a ceiling: after the best match, only what the evidence supports is handed over",
     ("block_cut", "block_weak_cut", "block_gap", "block_redundancy")),
    ("Active-tool filter", "a memory naming a tool in use is dropped: a schema-ish marker and no durable one",
     ("schema_markers", "durable_markers")),
)  # fmt: skip
MARKER_KNOBS = {"schema_markers": DEFAULT_SCHEMA_MARKERS, "durable_markers": DEFAULT_DURABLE_MARKERS}
CHOICE_KNOBS = {"fusion": FUSIONS}


def knob_names() -> list[str]:
    own = [knob.name for knob in fields(RecallSettings) if knob.name != "retrieval"]
    return [knob.name for knob in fields(RetrievalSettings)] + own


class ProfileForm(forms.ModelForm):
    """A profile's name and description, and one field per knob: blank means the built-in default."""

    class Meta:
        model = RecallProfile
        fields = ["name", "description"]
        labels = {"name": "Name", "description": "Description"}
        help_texts = {
            "name": "lower-case letters, digits, '.', '_' and '-'; the API and manage.py recall --profile use it",
            "description": "what the profile is for (optional)",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        defaults = RecallSettings().to_dict()
        knobs = self.instance.knobs or {}
        for name in knob_names():
            default = defaults[name]
            label, help_text = KNOBS.get(name, (name, ""))
            if name in MARKER_KNOBS:
                field = forms.CharField(
                    required=False,
                    widget=forms.Textarea(attrs={"rows": 4, "placeholder": "\n".join(MARKER_KNOBS[name])}),
                )
                initial = "\n".join(knobs[name]) if knobs.get(name) else ""
            elif name == "selector":
                field = forms.TypedChoiceField(
                    required=False,
                    choices=[("", f"default ({'on' if default else 'off'})"), ("on", "on"), ("off", "off")],
                )
                initial = "" if name not in knobs else ("on" if knobs[name] else "off")
            elif name in CHOICE_KNOBS:
                field = forms.ChoiceField(
                    required=False, choices=[("", f"default ({default})")] + [(c, c) for c in CHOICE_KNOBS[name]]
                )
                initial = knobs.get(name, "")
            else:
                placeholder = "" if default is None else f"{default:g}"
                field = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": placeholder}))
                initial = "" if knobs.get(name) is None else f"{knobs[name]:g}"
            field.label, field.help_text, field.initial = label, help_text, initial
            self.fields[name] = field
        if self.instance.pk and self.instance.name == DEFAULT_PROFILE:
            self.fields["name"].disabled = True

    @property
    def knob_groups(self) -> list[tuple[str, str, list]]:
        """(title, what it tunes, bound fields), every knob once: one the groups miss comes last."""
        names = set(knob_names())
        groups = [
            (title, about, [self[name] for name in group if name in names]) for title, about, group in KNOB_GROUPS
        ]
        grouped = {name for _, _, group in KNOB_GROUPS for name in group}
        rest = [self[name] for name in knob_names() if name not in grouped]
        return [g for g in groups if g[2]] + ([("Other knobs", "", rest)] if rest else [])

    def clean(self):
        cleaned = super().clean()
        knobs: dict = {}
        for name in knob_names():
            raw = cleaned.get(name)
            if raw in (None, ""):
                continue
            if name in MARKER_KNOBS:
                knobs[name] = [line.strip() for line in raw.splitlines() if line.strip()]
            elif name == "selector":
                knobs[name] = raw == "on"
            elif name in CHOICE_KNOBS:
                knobs[name] = raw
            else:
                try:
                    number = float(raw)
                except ValueError:
                    self.add_error(name, f"must be a number, got {raw!r}")
                    continue
                knobs[name] = int(number) if number.is_integer() else number
        try:
            RecallSettings.from_dict(knobs)
        except SettingsError as exc:
            for knob, messages in exc.errors.items():
                target = knob if knob in self.fields else None
                for message in messages:
                    self.add_error(target, message if target else f"{knob}: {message}")
        else:
            # Only valid knobs reach the model (whose clean() would refuse them again, on no field).
            self.instance.knobs = knobs
        return cleaned


# --- golden sets --------------------------------------------------------------------------------


class GoldenSetForm(forms.ModelForm):
    class Meta:
        model = GoldenSet
        fields = ["name", "scope", "description"]
        labels = {"name": "Name", "scope": "Scope", "description": "Description"}
        help_texts = {
            "name": "unique within its scope",
            "scope": "the scope its queries run in, e.g. agent:main",
            "description": "what the set checks (optional)",
        }
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "scope": forms.TextInput(
                attrs={"list": "scope-options", "autocomplete": "off", "placeholder": "agent:main"}
            ),
        }

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])


class GoldenQueryForm(forms.ModelForm):
    """One golden query: the memories recall should return, by full or short id (as the pages show
    them), or "Should stay silent" ticked; a blank list is never taken to mean silence."""

    tools_text = forms.CharField(
        label="Recent tools",
        required=False,
        help_text="the tools the agent used just before, comma-separated, most recent last",
        widget=forms.TextInput(attrs={"placeholder": "mcp__ata__article-list-query", "autocomplete": "off"}),
    )
    expected_text = forms.CharField(
        label="Expected memories",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "5ab48963, 484be380", "autocomplete": "off"}),
        help_text=(
            f"memory ids, full or their first {golden.SHORT_ID_MIN} characters as the pages show them, "
            f"comma- or line-separated ({golden.NOTHING}: the same as ticking “Should stay silent”)"
        ),
    )
    silent = forms.BooleanField(
        label="Should stay silent",
        required=False,
        help_text="recall should return nothing for this query (leave the expected memories blank)",
    )

    class Meta:
        model = GoldenQuery
        fields = ["query", "note"]
        labels = {"query": "Query", "note": "Note"}
        help_texts = {"query": "what the agent's turn is about", "note": "why the query is in the set (optional)"}
        widgets = {"query": forms.TextInput(attrs={"autocomplete": "off"})}

    def __init__(self, *args, golden_set: GoldenSet, **kwargs):
        super().__init__(*args, **kwargs)
        self.golden_set = golden_set
        self.says_nothing = False

    def clean_tools_text(self) -> list[str]:
        return split_list(self.cleaned_data["tools_text"])

    def clean_expected_text(self) -> list[str]:
        tokens = split_list(self.cleaned_data["expected_text"])
        ids, problems = golden.resolve_expected(tokens, self.golden_set.scope)
        if problems:
            raise forms.ValidationError([str(problem) for problem in problems])
        self.says_nothing = golden.says_nothing(tokens)
        return ids

    def clean(self):
        cleaned = super().clean()
        if "expected_text" not in cleaned:
            return cleaned  # its own error says what is wrong
        silent = cleaned.get("silent") or self.says_nothing
        if cleaned["expected_text"] and cleaned.get("silent"):
            self.add_error(
                "silent", "a query that should stay silent expects no memories: untick this or clear the list"
            )
        elif not cleaned["expected_text"] and not silent:
            self.add_error(
                "expected_text",
                "list the memories recall should return, or tick “Should stay silent” if it should return nothing",
            )
        cleaned["silent"] = silent
        return cleaned

    def save(self, commit: bool = True) -> GoldenQuery:
        query = super().save(commit=False)
        query.golden_set = self.golden_set
        query.tools = self.cleaned_data["tools_text"]
        query.expected_ids = [] if self.cleaned_data["silent"] else self.cleaned_data["expected_text"]
        if commit:
            query.save()
        return query


class GoldenRunForm(forms.Form):
    a = forms.ChoiceField(label="Profile", choices=())
    b = forms.ChoiceField(label="Compare with", choices=(), required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        choices = profile_choices()
        self.fields["a"].choices = choices
        self.fields["b"].choices = [("", "—"), *choices]


class CalibrateForm(forms.Form):
    profile = forms.ChoiceField(label="Start from", choices=())
    save_as = forms.CharField(
        label="Save as profile",
        max_length=64,
        validators=RecallProfile._meta.get_field("name").validators,
        help_text="lower-case letters, digits, '.', '_' and '-'; an existing profile is overwritten",
    )
    min_answered = forms.FloatField(
        label="Answer at least",
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="share of the queries expecting memories (blank: the best balance with staying silent)",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["profile"].choices = profile_choices()
