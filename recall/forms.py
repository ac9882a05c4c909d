"""Forms of the recall pages: the playground, profiles (one field per knob), golden sets and queries."""

from __future__ import annotations

import re
import uuid
from dataclasses import fields

from django import forms

from memoryui import rules
from memoryui.models import Memory
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
    why = forms.CharField(
        label="Why not recalled?",
        required=False,
        max_length=64,
        widget=forms.TextInput(attrs={"placeholder": "a memory id", "autocomplete": "off"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["profile"].choices = profile_choices()

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])

    def clean_tools(self) -> list[str]:
        return split_list(self.cleaned_data["tools"])

    def clean_profile(self) -> RecallProfile:
        return RecallProfile.objects.resolve(self.cleaned_data.get("profile") or DEFAULT_PROFILE)


# --- profiles -----------------------------------------------------------------------------------

KNOB_HELP = {
    "vector_k": "candidates taken from the vector index",
    "bm25_k": "candidates taken from the BM25 index",
    "fusion": "cc: convex combination of normalised scores; rrf: reciprocal rank fusion",
    "cc_vector_weight": "cc: the vector margin's weight (BM25 gets 1 minus it)",
    "cc_min_coverage": "cc: BM25 coverage up to this adds nothing (a shared name is no evidence)",
    "rrf_k": "rrf: the k of w/(k + rank)",
    "rrf_vector_weight": "rrf: the vector list's weight",
    "rrf_bm25_weight": "rrf: the BM25 list's weight",
    "limit": "memories recalled, 1..20",
    "strong_margin": "strong: vector similarity this far above the query's anchor…",
    "strong_coverage": "…or BM25 holds this share of the query's terms (by rarity)…",
    "agree_margin": "…or both retrievers agree: this margin…",
    "agree_coverage": "…together with this coverage",
    "weak_margin": "weak (shown with an answered query): this margin…",
    "weak_coverage": "…or this coverage",
    "candidates": "strong and weak candidates the selector and the heuristic see",
    "selector": "ask the model selector when an LLM is configured",
    "selector_timeout_ms": "the selector's latency budget (blank: MEMORYUI_SELECTOR_TIMEOUT_MS)",
    "weight_retrieval": "heuristic: × fused score share",
    "weight_exact": "heuristic: exact key or tool-name match",
    "weight_substring": "heuristic: the whole query occurs in the text",
    "weight_tags": "heuristic: a query term is a tag",
    "weight_text": "heuristic: × share of query terms in the text",
    "schema_markers": "active-tool filter: schema-ish markers, one per line (blank: the built-in list)",
    "durable_markers": "active-tool filter: durable markers, one per line (blank: the built-in list)",
}
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
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        defaults = RecallSettings().to_dict()
        knobs = self.instance.knobs or {}
        for name in knob_names():
            default = defaults[name]
            help_text = KNOB_HELP.get(name, "")
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
            field.label, field.help_text, field.initial = name, help_text, initial
            self.fields[name] = field
        if self.instance.pk and self.instance.name == DEFAULT_PROFILE:
            self.fields["name"].disabled = True

    @property
    def knob_fields(self):
        return [self[name] for name in knob_names()]

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
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])


class GoldenQueryForm(forms.ModelForm):
    tools_text = forms.CharField(label="Recent tools", required=False, help_text="comma-separated, most recent last")
    expected_text = forms.CharField(
        label="Expected memory ids",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="comma- or line-separated; none: recall should return nothing",
    )

    class Meta:
        model = GoldenQuery
        fields = ["query", "note"]
        widgets = {"query": forms.TextInput()}

    def __init__(self, *args, golden_set: GoldenSet, **kwargs):
        super().__init__(*args, **kwargs)
        self.golden_set = golden_set

    def clean_tools_text(self) -> list[str]:
        return split_list(self.cleaned_data["tools_text"])

    def clean_expected_text(self) -> list[str]:
        ids, problems = [], []
        for raw in split_list(self.cleaned_data["expected_text"]):
            try:
                ids.append(str(uuid.UUID(raw)))
            except ValueError:
                problems.append(f"{raw[:40]!r} is not a memory id")
        found = dict(Memory.objects.filter(pk__in=ids).values_list("pk", "scope"))
        for pk in ids:
            scope = found.get(uuid.UUID(pk))
            if scope is None:
                problems.append(f"no memory has the id {pk}")
            elif scope != self.golden_set.scope:
                problems.append(f"{pk} is in {scope}, not in this set's scope {self.golden_set.scope}")
        if problems:
            raise forms.ValidationError(problems)
        return list(dict.fromkeys(ids))

    def save(self, commit: bool = True) -> GoldenQuery:
        query = super().save(commit=False)
        query.golden_set = self.golden_set
        query.tools = self.cleaned_data["tools_text"]
        query.expected_ids = self.cleaned_data["expected_text"]
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
