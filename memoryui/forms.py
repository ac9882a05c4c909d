"""HTML forms. Validation is the domain's (rules.clean_memory_fields, the write path, the
domain methods); these forms parse browser input and put the domain's errors next to the field."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.db import transaction

from memoryui import rules, untrusted, writing
from memoryui.models import ApiToken, ConflictError, Memory

# --- memory list ---------------------------------------------------------------------------

SORT_FIELDS = {
    "updated": "updated_at",
    "created": "created_at",
    "importance": "importance",
    "access_count": "access_count",
}
DEFAULT_SORT = "-updated"
MATCH_MODES = {"hybrid": "meaning + words", "text": "plain text"}


class MemoryListForm(forms.Form):
    """The list page's own query parameters: search mode, sort and page.

    The base of `filters.MemoryListFilterSet`'s form, which adds the filters' fields (q, scope,
    kind, tier, status, pinned, source): the page renders and validates that form. Blank means 'any'.
    """

    field_order = ("q", "match", "scope", "kind", "tier", "status", "pinned", "source", "sort", "page")

    match = forms.ChoiceField(
        required=False,
        choices=list(MATCH_MODES.items()),
        widget=forms.Select(attrs={"data-default": "hybrid"}),
        help_text="meaning + words: hybrid search (vector + BM25), ranked by relevance; plain text: substring match",
        error_messages={"invalid_choice": f"%(value)r is not a match mode; use one of: {', '.join(MATCH_MODES)}"},
    )
    sort = forms.ChoiceField(
        required=False,
        choices=[
            (f"{sign}{key}", f"{key.replace('_', ' ')} {'↓' if sign else '↑'}")
            for key in SORT_FIELDS
            for sign in ("-", "")
        ],  # fmt: skip
        widget=forms.Select(attrs={"data-default": DEFAULT_SORT}),
        error_messages={
            "invalid_choice": "%(value)r is not a sort order; use one of: "
            + ", ".join(SORT_FIELDS)
            + " (prefix - for descending)"
        },
    )
    page = forms.IntegerField(
        required=False,
        min_value=1,
        error_messages={"invalid": "page must be a whole number", "min_value": "page must be 1 or more"},
    )

    def clean_match(self) -> str:
        return self.cleaned_data["match"] or "hybrid"

    def clean_sort(self) -> str:
        return self.cleaned_data["sort"] or DEFAULT_SORT

    def order_by(self) -> tuple[str, str]:
        """The sort as order_by() arguments; the id tie-break keeps pages stable when many rows share a value."""
        sort = self.cleaned_data["sort"]
        field = SORT_FIELDS[sort.lstrip("-")]
        prefix = "-" if sort.startswith("-") else ""
        return f"{prefix}{field}", f"{prefix}id"


# --- create / edit ------------------------------------------------------------------------

PINNED_ON_CREATE = {"": None, "yes": True, "no": False}


class MemoryForm(forms.Form):
    """Create or edit a memory. clean() asks the domain's rules; save() goes through the write
    path (create) or memory.edit() (edit), and any error they raise lands on its field."""

    scope = forms.CharField(max_length=rules.SCOPE_MAX_LENGTH, help_text="e.g. agent:main, user:42, global")
    kind = forms.ChoiceField(choices=[(kind, kind.replace("_", " ")) for kind in rules.KINDS])
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), strip=True)
    tier = forms.ChoiceField(
        required=False,
        choices=[("", "by the rules"), *[(t, t) for t in rules.TIERS]],
    )
    importance = forms.FloatField(required=False, help_text="0..1; blank = by the rules")
    confidence = forms.FloatField(required=False, help_text="0..1; how sure the writer was")
    pinned = forms.ChoiceField(required=False, choices=[("", "by the rules"), ("yes", "pinned"), ("no", "not pinned")])
    source = forms.ChoiceField(choices=[(s, s) for s in rules.SOURCES], initial="manual")
    entity_key = forms.CharField(required=False, max_length=rules.ENTITY_KEY_MAX_LENGTH, help_text="type:value")
    expires_at = forms.CharField(required=False, help_text="ISO 8601 with a time zone, e.g. 2030-01-01T00:00:00Z")
    metadata = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
        initial="{}",
        help_text="a JSON object",
    )

    def __init__(self, *args, memory: Memory | None = None, **kwargs):
        self.memory = memory
        if memory is not None:
            kwargs.setdefault("initial", self.initial_from(memory))
        super().__init__(*args, **kwargs)
        if memory is not None:
            # An edit sets every field explicitly; "by the rules" only applies on create.
            self.fields["tier"].required = True
            self.fields["tier"].choices = [(t, t) for t in rules.TIERS]
            self.fields["importance"].required = self.fields["confidence"].required = True
            self.fields["importance"].help_text = "0..1"
            self.fields["pinned"] = forms.BooleanField(required=False)
            self.fields["reason"] = forms.CharField(
                required=False, max_length=500, help_text="optional; recorded in the history"
            )

    @staticmethod
    def initial_from(memory: Memory) -> dict:
        return {
            "scope": memory.scope,
            "kind": memory.kind,
            "text": memory.text,
            "tier": memory.tier,
            "importance": memory.importance,
            "confidence": memory.confidence,
            "pinned": memory.pinned,
            "source": memory.source,
            "entity_key": memory.entity_key or "",
            "expires_at": memory.expires_at.isoformat() if memory.expires_at else "",
            "metadata": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True),
        }

    def clean_metadata(self) -> dict:
        raw = self.cleaned_data["metadata"].strip()
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", code="invalid_json"
            ) from None
        except RecursionError:
            # Thousands of levels exhaust the decoder before rules.clean_memory_fields could count them.
            raise forms.ValidationError(
                f"is nested more than {untrusted.MAX_JSON_DEPTH} levels deep", code="too_deep"
            ) from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise forms.ValidationError(f"Invalid JSON: {exc}", code="invalid_json") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('must be a JSON object, e.g. {"tags": ["ops"]}', code="not_object")
        return value

    def domain_fields(self) -> dict:
        """The cleaned values in the domain's vocabulary; blanks left to the rules on create."""
        data = dict(self.cleaned_data)
        data.pop("reason", None)
        if self.memory is None:
            if "pinned" in data:
                data["pinned"] = PINNED_ON_CREATE[data["pinned"] or ""]
            return {name: value for name, value in data.items() if value not in (None, "")}
        for name in ("entity_key", "expires_at"):
            if name in data:
                data[name] = data[name] or None
        return data

    def clean(self):
        cleaned = super().clean()
        # Check what parsed against the domain's rules now, so every problem shows at once;
        # required fields are the form's job, and save() runs the full check again.
        try:
            rules.clean_memory_fields(
                self.domain_fields(), partial=True, text_max_length=settings.MEMORYUI_TEXT_MAX_LENGTH
            )
        except rules.MemoryValidationError as exc:
            self.add_domain_errors(exc.errors)
        return cleaned

    def add_domain_errors(self, errors: dict[str, list[str]]) -> None:
        for name, messages in errors.items():
            if name in self.fields:
                if name not in self.errors:
                    self.add_error(name, messages)
            else:
                self.add_error(None, [f"{name}: {message}" for message in messages])

    def save(self, *, actor: str) -> tuple[Memory, bool] | None:
        """Create (through the write path) or edit; None with form errors when the domain refuses.

        Returns (memory, created): created is False when the write merged into a duplicate or
        when this was an edit. One transaction: whatever fails undoes all of it.
        """
        try:
            with transaction.atomic():
                if self.memory is None:
                    return writing.write(actor=actor, **self.domain_fields())
                self.memory.edit(actor=actor, reason=self.cleaned_data.get("reason", ""), **self.domain_fields())
                return self.memory, False
        except rules.MemoryValidationError as exc:
            self.add_domain_errors(exc.errors)
        except ConflictError as exc:
            self.add_error("entity_key", str(exc))
        return None


# --- bulk actions -------------------------------------------------------------------------

BULK_ACTIONS = {
    "pin": ("Pinned", "already pinned"),
    "unpin": ("Unpinned", "not pinned"),
    "tombstone": ("Tombstoned", "already tombstoned"),
    "restore": ("Restored", "already active"),
    "set_tier": ("Moved", "already in that tier"),
}
BULK_MAX = 500


def _memories(n: int) -> str:
    return f"{n} memor{'y' if n == 1 else 'ies'}"


@dataclass(frozen=True)
class BulkResult:
    changed: int
    unchanged: int
    batch: uuid.UUID
    message: str


class BulkActionForm(forms.Form):
    action = forms.ChoiceField(
        choices=[(a, a) for a in BULK_ACTIONS],
        error_messages={"required": "Choose an action.", "invalid_choice": "%(value)r is not a bulk action."},
    )
    ids = forms.TypedMultipleChoiceField(required=False, coerce=uuid.UUID)
    reason = forms.CharField(required=False, max_length=500)
    tier = forms.ChoiceField(required=False, choices=[("", "tier…"), *[(t, t) for t in rules.TIERS]])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Any well-formed UUID is a valid choice; unknown ones simply match nothing.
        self.fields["ids"].valid_value = self._is_uuid

    @staticmethod
    def _is_uuid(value) -> bool:
        try:
            uuid.UUID(str(value))
        except ValueError:
            return False
        return True

    def clean(self):
        cleaned = super().clean()
        ids = cleaned.get("ids") or []
        if "ids" not in self.errors and not ids:
            self.add_error("ids", "Select at least one memory.")
        if len(ids) > BULK_MAX:
            self.add_error("ids", f"Select at most {BULK_MAX} memories at a time.")
        action = cleaned.get("action")
        if action == "tombstone" and not (cleaned.get("reason") or "").strip():
            self.add_error("reason", "A reason is required to tombstone memories.")
        if action == "set_tier" and not cleaned.get("tier"):
            self.add_error("tier", "Choose the tier to move the memories to.")
        return cleaned

    def apply(self, *, actor: str) -> BulkResult:
        """Apply the action to every selected memory in one transaction and one batch.

        Domain errors (MemoryValidationError, ConflictError) roll the whole batch back.
        """
        data = self.cleaned_data
        action, batch = data["action"], uuid.uuid4()
        changed = unchanged = 0
        with transaction.atomic():
            for memory in Memory.objects.select_for_update().filter(pk__in=data["ids"]).order_by("pk"):
                done = memory.apply_action(action, actor=actor, batch=batch, reason=data["reason"], tier=data["tier"])
                changed += bool(done)
                unchanged += not done
        verb, why = BULK_ACTIONS[action]
        message = f"{verb} {_memories(changed)}"
        if action == "set_tier":
            message += f" to {data['tier']}"
        if unchanged:
            message += f" ({unchanged} {why})"
        return BulkResult(changed=changed, unchanged=unchanged, batch=batch, message=message + ".")

    class _RolledBack(Exception):
        pass

    def preview(self, *, actor: str) -> BulkResult:
        """What `apply` would do, counted exactly: it runs in a transaction that is rolled back."""
        outcome = []
        try:
            with transaction.atomic():
                outcome.append(self.apply(actor=actor))
                raise self._RolledBack
        except self._RolledBack:
            pass
        return outcome[0]

    # The confirmation: what the action does, in the present tense, and what it means.
    ASK = {
        "pin": ("Pin", "Pinned memories never decay and are boosted in recall."),
        "unpin": ("Unpin", "Unpinned memories decay like any other."),
        "tombstone": ("Tombstone", "Tombstoned memories leave recall and search; nothing is deleted."),
        "restore": ("Restore", "Restored memories are recalled and searched again."),
        "set_tier": ("Move", "The tier sets how long a memory lasts and how much recall favours it."),
    }

    def confirmation(self, preview: BulkResult) -> dict:
        """The title, consequences and button of the confirmation for `preview` (web.confirmation)."""
        data = self.cleaned_data
        action = data["action"]
        verb, meaning = self.ASK[action]
        what = f"{verb} {_memories(preview.changed)}" + (f" to {data['tier']}" if action == "set_tier" else "")
        first = what + (f" (reason: “{data['reason'].strip()}”)" if action == "tombstone" else "") + "."
        if preview.unchanged:
            first += f" {preview.unchanged} {'is' if preview.unchanged == 1 else 'are'} {BULK_ACTIONS[action][1]}."
        return {
            "title": what + "?",
            "consequences": [first, meaning, "Undo, offered with the result, puts them back as they were."],
            "button": what,
            "danger": action == "tombstone",
        }


# --- API tokens ---------------------------------------------------------------------------


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100)
    scopes = forms.CharField(
        required=False,
        max_length=2000,
        help_text="comma-separated, e.g. agent:main, user:42; blank = every scope (admins only)",
    )
    access = forms.ChoiceField(
        required=False,
        choices=ApiToken.Access.choices,
        help_text="read: reads and recalls only; write: may also change memories (editors and admins)",
    )

    def __init__(self, *args, default_access: str = ApiToken.Access.WRITE, **kwargs):
        super().__init__(*args, **kwargs)
        self.default_access = default_access
        self.fields["access"].initial = default_access

    def clean_scopes(self) -> list[str]:
        return [scope.strip() for scope in self.cleaned_data["scopes"].split(",") if scope.strip()]

    def clean_access(self) -> str:
        return self.cleaned_data["access"] or self.default_access

    def save(self, *, user) -> tuple[ApiToken, str] | None:
        """Issue the token; returns (token, raw key) or None with the domain's errors on the form."""
        try:
            return ApiToken.issue(
                user=user,
                name=self.cleaned_data["name"],
                scopes=self.cleaned_data["scopes"],
                access=self.cleaned_data["access"],
            )
        except rules.MemoryValidationError as exc:
            for name, messages in exc.errors.items():
                self.add_error(name if name in self.fields else None, messages)
        return None
