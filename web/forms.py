"""HTML forms. Validation is the domain's (rules.clean_memory_fields, the write path, the
domain methods); these forms parse browser input and put the domain's errors next to the field."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.db import models, transaction
from django.forms.fields import InvalidJSONInput, JSONString
from django.utils import timezone
from django.utils.text import capfirst

from ingest import sessionlogs, writing
from ingest.ingestion import MAX_FILE_MESSAGES, IngestReport, TranscriptError, ingest
from ingest.memoryfiles import FormatError
from ingest.memoryfiles import detect as memoryfiles_detect
from ingest.tasks import enqueue_extraction
from memoryui import jsontext, rules
from memoryui.models import ApiToken, ConflictError, Memory, TaskRun
from memoryui.models.transcripts import EXTERNAL_ID_MAX_LENGTH
from memoryui.text import memories

# --- JSON typed in a form ------------------------------------------------------------------


class GuardedJSONField(forms.JSONField):
    """Django's JSON form field, reading what was typed with memoryui.jsontext (the API's limits):
    text nested past 32 levels, larger than the API takes, or holding NaN is an invalid value,
    never a RecursionError. The back office's JSON fields (`GUARDED_JSON`) are such fields."""

    def to_python(self, value):
        if self.disabled or value in self.empty_values or not isinstance(value, str) or isinstance(value, JSONString):
            return super().to_python(value)
        try:
            converted = jsontext.loads(value)
        except jsontext.JSONTextError as exc:
            raise forms.ValidationError(f"Enter a valid JSON value: {exc}", code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data, initial):
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return jsontext.loads(data)
        except jsontext.JSONTextError:
            return InvalidJSONInput(data)


GUARDED_JSON = {models.JSONField: {"form_class": GuardedJSONField}}  # a ModelAdmin's formfield_overrides


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

PINNED_BY_THE_RULES = "rules"
PINNED_CHOICES = {PINNED_BY_THE_RULES: None, "yes": True, "no": False}


class MemoryForm(forms.Form):
    """Create or edit a memory. clean() asks the domain's rules; save() goes through the write
    path (create) or memory.edit() (edit), and any error they raise lands on its field.

    Labels and help texts are the model fields' verbose names and help texts. Create and edit
    show the same widgets; only create offers "by the rules" (tier, importance, pinned), because
    the rules place a new memory and an edit sets every field explicitly.
    """

    scope = forms.CharField(max_length=rules.SCOPE_MAX_LENGTH)
    # No default kind: what sort of knowledge it is is the writer's call, and a preselected kind
    # would be saved unnoticed.
    kind = forms.ChoiceField(
        choices=[("", "Choose a kind…"), *[(kind, kind.replace("_", " ")) for kind in rules.KINDS]],
        error_messages={"required": f"Choose a kind: {', '.join(k.replace('_', ' ') for k in rules.KINDS)}."},
    )
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), strip=True)
    tier = forms.ChoiceField(required=False, choices=[("", "by the rules"), *[(t, t) for t in rules.TIERS]])
    importance = forms.FloatField(required=False)
    confidence = forms.FloatField(required=False)
    # Radio buttons on create and edit alike: pinned is a choice among two or three values that are
    # all worth seeing at once, and a new memory's third one ("by the rules": the rules pin
    # identities and stable preferences) is one a checkbox cannot say.
    pinned = forms.ChoiceField(
        required=False,
        choices=[(PINNED_BY_THE_RULES, "by the rules"), ("yes", "pinned"), ("no", "not pinned")],
        initial=PINNED_BY_THE_RULES,
        widget=forms.RadioSelect(attrs={"class": "choices"}),
    )
    source = forms.ChoiceField(choices=[(s, s) for s in rules.SOURCES], initial="manual")
    entity_key = forms.CharField(required=False, max_length=rules.ENTITY_KEY_MAX_LENGTH)
    expires_at = forms.CharField(required=False)
    metadata = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}), initial="{}")

    BY_THE_RULES_HELP = {
        "tier": "Blank: by the rules, from the kind and the confidence.",
        "importance": "Blank: by the rules, from the kind and the confidence.",
        "confidence": "Blank: 0.7.",
        "expires_at": "Blank: by the rules (peripheral: in {ttl} days).",
    }

    def __init__(self, *args, memory: Memory | None = None, **kwargs):
        self.memory = memory
        if memory is not None:
            kwargs.setdefault("initial", self.initial_from(memory))
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            model_field = Memory._meta.get_field(name)
            field.label = capfirst(model_field.verbose_name)
            field.help_text = model_field.help_text
        self.fields["scope"].widget.attrs["placeholder"] = "agent:main"
        self.fields["entity_key"].widget.attrs["placeholder"] = "type:value"
        self.fields["expires_at"].widget.attrs["placeholder"] = "2030-01-01T00:00:00Z"
        if memory is None:
            for name, extra in self.BY_THE_RULES_HELP.items():
                extra = extra.format(ttl=settings.MEMORYUI_PERIPHERAL_TTL_DAYS)
                self.fields[name].help_text = f"{self.fields[name].help_text} {extra}"
            self.fields["importance"].widget.attrs["placeholder"] = "by the rules"
            self.fields["confidence"].widget.attrs["placeholder"] = "0.7"
        else:
            # An edit sets every field explicitly; "by the rules" only applies on create.
            self.fields["tier"].required = True
            self.fields["tier"].choices = [(t, t) for t in rules.TIERS]
            self.fields["importance"].required = self.fields["confidence"].required = True
            self.fields["pinned"].required = True
            self.fields["pinned"].choices = self.fields["pinned"].choices[1:]
            self.fields["expires_at"].help_text += " Blank: never."
            self.fields["reason"] = forms.CharField(
                required=False, max_length=500, label="Reason", help_text="Optional; recorded in the history."
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
            "pinned": "yes" if memory.pinned else "no",
            "source": memory.source,
            "entity_key": memory.entity_key or "",
            "expires_at": _to_the_second(memory.expires_at),
            "metadata": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True),
        }

    def clean_metadata(self) -> dict:
        raw = self.cleaned_data["metadata"].strip()
        if not raw:
            return {}
        try:
            value = jsontext.loads(raw, root="metadata")
        except jsontext.JSONTextError as exc:
            if exc.code == jsontext.TOO_DEEP:
                raise forms.ValidationError(str(exc), code="too_deep") from None
            if exc.code == jsontext.TOO_LARGE:
                raise forms.ValidationError(exc.reason, code="too_large") from None
            raise forms.ValidationError(f"Invalid JSON: {exc}", code="invalid_json") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('must be a JSON object, e.g. {"tags": ["ops"]}', code="not_object")
        return value

    def domain_fields(self) -> dict:
        """The cleaned values in the domain's vocabulary; blanks left to the rules on create."""
        data = dict(self.cleaned_data)
        data.pop("reason", None)
        if "pinned" in data:
            data["pinned"] = PINNED_CHOICES.get(data["pinned"] or PINNED_BY_THE_RULES)
        if self.memory is None:
            return {name: value for name, value in data.items() if value not in (None, "")}
        for name in ("entity_key", "expires_at"):
            if name in data:
                data[name] = data[name] or None
        if data.get("expires_at") and data["expires_at"] == _to_the_second(self.memory.expires_at):
            # Shown to the second: left as it was, the expiry keeps its fraction (and no edit is recorded).
            data["expires_at"] = self.memory.expires_at
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


def _to_the_second(moment) -> str:
    """A time as the edit form shows it: ISO 8601 in the current time zone, to the second."""
    return timezone.localtime(moment).isoformat(timespec="seconds") if moment else ""


# --- bulk actions -------------------------------------------------------------------------

BULK_ACTIONS = {
    "pin": ("Pinned", "already pinned"),
    "unpin": ("Unpinned", "not pinned"),
    "tombstone": ("Tombstoned", "already tombstoned"),
    "restore": ("Restored", "already active"),
    "set_tier": ("Moved", "already in that tier"),
}
BULK_MAX = 500


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
        message = f"{verb} {memories(changed)}"
        if action == "set_tier":
            message += f" to {data['tier']}"
        if unchanged:
            message += f" ({unchanged} {why})"
        return BulkResult(changed=changed, unchanged=unchanged, batch=batch, message=message + ".")

    def preview(self, *, actor: str) -> BulkResult:
        """What `apply` would do, counted exactly: it runs in a transaction that is rolled back."""
        with transaction.atomic():
            result = self.apply(actor=actor)
            transaction.set_rollback(True)
        return result

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
        what = f"{verb} {memories(preview.changed)}" + (f" to {data['tier']}" if action == "set_tier" else "")
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


# --- transcripts --------------------------------------------------------------------------

TRANSCRIPT_EXAMPLE = """{
  "id": "session-2026-11-25-7f3a",
  "scope": "agent:main",
  "messages": [
    {"role": "user", "content": "I deploy on Fridays; remember that."},
    {"role": "assistant", "content": "Noted."}
  ]
}"""


TRANSCRIPT_PLACEHOLDER = '{"id": "session-7f3a", "scope": "agent:main", "messages": [{"role": "user", "content": "…"}]}'


@dataclass(frozen=True)
class PostedTranscript:
    report: IngestReport
    extraction: TaskRun | None


class TranscriptPostForm(forms.Form):
    """Post a transcript from the browser: pasted or a file, in memoryui's transcript JSON or a
    session log an agent wrote (Claude Code JSONL, a gemini-cli / qwen-code chat checkpoint,
    OpenAI messages; ingest.sessionlogs, detected unless a format is chosen), validated by the
    API's own rules (ingest.ingestion), each problem named as the API names it
    (`messages[2].tool_call_id`).

    The scope and the id may come from the JSON (`{"id"?, "scope", "messages": [...]}`) or from
    the fields here, which fill in what the JSON leaves out; a bare list is taken as the messages.
    A session log names no scope (give one here); the id given here takes the place of its own.
    Posting an id again in its scope is what the API does: only new messages are added.
    """

    transcript = forms.CharField(
        label="Transcript JSON",
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 12,
                "class": "mono",
                "spellcheck": "false",
                "placeholder": TRANSCRIPT_PLACEHOLDER,
            }
        ),
        help_text=(
            'Paste {"id"?, "scope", "messages": [...]}, or only the list of messages, or a session log '
            "(Claude Code JSONL, a gemini-cli or qwen-code checkpoint, OpenAI messages)."
        ),
    )
    file = forms.FileField(
        label="Or a file",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".json,.jsonl,application/json"}),
        help_text="A .json file, or a session log (.jsonl, checkpoint-<tag>.json).",
    )
    format = forms.ChoiceField(
        label="Format",
        required=False,
        choices=[("", "Detect from the content"), *sessionlogs.FORMAT_LABELS.items()],
        help_text=(
            "What the text or file is. A session log keeps its format, so its projection can be exported back in it."
        ),
    )
    scope = forms.CharField(
        required=False,
        max_length=rules.SCOPE_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "from the JSON", "list": "scope-options"}),
        help_text="Where the transcript belongs, e.g. agent:main; blank: the JSON's scope.",
    )
    external_id = forms.CharField(
        label="Transcript id",
        required=False,
        # Longer input is refused by the ingestion rules with the API's own message.
        widget=forms.TextInput(attrs={"placeholder": "from the JSON, or none"}),
        help_text=(
            f"The agent's own id for it, e.g. a session id: any text up to {EXTERNAL_ID_MAX_LENGTH} characters, "
            "unique within the scope. Posting the same id in the same scope again adds only the new messages; "
            "stored messages never change. Blank: the JSON's id, or a new transcript."
        ),
    )
    extract = forms.BooleanField(
        label="Extract memories after storing",
        required=False,
        help_text="Queues an extraction task, as ?extract=true does in the API.",
    )

    # Where the ingestion rules' problems with the transcript's own fields are shown, when the
    # value came from this form rather than the JSON.
    FORM_FIELDS = {"scope": "scope", "id": "external_id"}

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload and upload.size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            raise forms.ValidationError(
                f"is {upload.size:,} bytes; at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} "
                "(post a long transcript in parts: posting it again adds only the new messages)"
            )
        return upload

    def clean(self):
        cleaned = super().clean()
        pasted, upload = (cleaned.get("transcript") or "").strip(), cleaned.get("file")
        if "file" in self.errors:
            return cleaned
        if pasted and upload:
            self.add_error("file", "Paste the JSON or choose a file, not both.")
            return cleaned
        if not pasted and not upload:
            self.add_error("transcript", "Paste the transcript JSON or choose a .json file.")
            return cleaned
        source = "file" if upload else "transcript"
        text = pasted
        if upload:
            try:
                text = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                self.add_error("file", f"is not UTF-8 text (byte {exc.start})")
                return cleaned
        try:
            session = sessionlogs.read(text, cleaned.get("format") or None, filename=upload.name if upload else "")
        except sessionlogs.SessionLogError as exc:
            chosen = cleaned.get("format")
            self.add_error(source, f"{exc}" if not chosen else f"Not a {sessionlogs.FORMAT_LABELS[chosen]}: {exc}")
            return cleaned
        cleaned["source"] = source
        cleaned["read_as"] = session.format
        cleaned["data"] = self._with_form_fields(session.transcript, session_log=session.format != "memoryui")
        return cleaned

    def _with_form_fields(self, data, *, session_log: bool = False):
        """The transcript with the scope and id the form gives (in place of a session log's own id)."""
        if not isinstance(data, dict):
            return data  # the ingestion rules say what is wrong with it
        data = dict(data)
        self.from_form = set()
        for key, name in self.FORM_FIELDS.items():
            given = (self.cleaned_data.get(name) or "").strip()
            if not given:
                continue
            in_json = data.get(key)
            if session_log and key == "id":
                in_json = None  # the session's own id is only a default
            if in_json not in (None, "") and not _same_value(key, in_json, given):
                self.add_error(name, f"the JSON's {key} is {str(in_json)[:80]!r}: leave this blank, or make them match")
            data[key] = given
            self.from_form.add(key)
        return data

    def save(self, *, actor: str) -> PostedTranscript | None:
        """Store the transcript (and queue its extraction when asked), in one transaction; None
        with the problems on the form when the ingestion rules refuse it."""
        data = self.cleaned_data["data"]
        try:
            with transaction.atomic():
                report = ingest(data, max_messages=MAX_FILE_MESSAGES)
                run = enqueue_extraction(report.transcript, actor=actor) if self.cleaned_data["extract"] else None
        except TranscriptError as exc:
            self._add_transcript_errors(exc.errors, data)
            return None
        except ConflictError as exc:
            self.add_error(self.cleaned_data["source"], f"Not stored: {exc}")
            return None
        return PostedTranscript(report=report, extraction=run)

    def _add_transcript_errors(self, errors: dict[str, list[str]], data) -> None:
        source = self.cleaned_data["source"]
        given = data if isinstance(data, dict) else {}
        for name, reasons in errors.items():
            field = self.FORM_FIELDS.get(name)
            # On the form's own field when the value came from it, or when neither gave one.
            if field and (name in getattr(self, "from_form", ()) or given.get(name) in (None, "")):
                self.add_error(field, reasons)
            else:
                self.add_error(source, [f"{name}: {reason}" for reason in reasons])


def _same_value(key: str, a, b: str) -> bool:
    if not isinstance(a, str):
        return False
    if key == "scope":
        try:
            return rules.normalize_scope(a) == rules.normalize_scope(b)
        except rules.ScopeError:
            return False
    return a.strip() == b.strip()


# --- memory import ---------------------------------------------------------------------------

IMPORT_FORMAT_CHOICES = [
    ("", "Detect from the file"),
    ("markdown-dir", "Markdown memory files (.md with front matter, or a .zip of the directory)"),
    ("context-file", "Added memories of a CLAUDE.md / GEMINI.md / QWEN.md"),
    ("mem0", "mem0 export (get_all JSON)"),
    ("jsonl", "memoryui JSONL"),
]


class MemoryImportForm(forms.Form):
    """Upload an agent's memory store (ingest.memoryfiles): the file, its format (or detected)
    and the scope. `cleaned_data` gets the files read, the format and the normalized scope."""

    file = forms.FileField(
        label="File",
        widget=forms.ClearableFileInput(attrs={"accept": ".md,.json,.jsonl,.zip"}),
        help_text="A .md memory or context file, a .zip of a markdown memory directory, a mem0 .json export "
        "or a memoryui .jsonl file.",
    )
    format = forms.ChoiceField(label="Format", choices=IMPORT_FORMAT_CHOICES, required=False)
    scope = forms.CharField(
        required=False,
        max_length=rules.SCOPE_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "from the file", "list": "scope-options"}),
        help_text="Where the memories go, e.g. agent:main. Blank: the file's own (mem0's user or agent, the "
        "JSONL lines, an export of ours); markdown and context files need one.",
    )
    dedup = forms.BooleanField(
        label="Merge duplicates",
        required=False,
        help_text="A memory with the same text or entity key as one already in the scope is merged into it.",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            raise forms.ValidationError(f"is {upload.size:,} bytes; at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}")
        try:
            self.cleaned_data["files"] = memoryfiles_detect.read_upload(upload.name, upload.read())
        except FormatError as exc:
            raise forms.ValidationError(str(exc)) from None
        return upload

    def clean_scope(self):
        raw = self.cleaned_data["scope"].strip()
        if not raw:
            return None
        try:
            return rules.normalize_scope(raw)
        except rules.ScopeError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        cleaned = super().clean()
        files = cleaned.get("files")
        if files is not None and not cleaned.get("format"):
            name = cleaned["file"].name
            try:
                cleaned["format"] = memoryfiles_detect.detect(files, given_a_directory=name.lower().endswith(".zip"))
            except FormatError as exc:
                self.add_error("format", str(exc))
        if cleaned.get("format") == "context-file" and not cleaned.get("scope") and "scope" not in self.errors:
            self.add_error("scope", "a context file does not say whose memories they are: choose a scope")
        return cleaned
