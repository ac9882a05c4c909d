"""The back office: every model registered; memory changes still go through domain methods.

Only the admin role signs in here (`memoryui.roles`); user roles are the `viewer`, `editor` and
`admin` groups, managed on the users' pages.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.forms import AuthenticationForm
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from ingest import writing
from memoryui import roles
from memoryui.models import (
    ApiToken,
    DistinctPair,
    IndexCheck,
    IndexOutbox,
    LexicalEntry,
    Memory,
    MemoryEvent,
    Message,
    PendingVector,
    TaskRun,
    Transcript,
)
from memoryui.text import exact_time
from recall.models import GoldenQuery, GoldenSet, RecallLogEntry, RecallProfile, RecallTrace
from web.forms import GUARDED_JSON


class AdminRoleLoginForm(AuthenticationForm):
    """The back office's sign-in: the admin role, not Django's staff flag, lets a user in."""

    required_css_class = "required"  # as AdminAuthenticationForm, whose is_staff check this replaces

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not roles.has_role(user, roles.Role.ADMIN):
            raise forms.ValidationError(
                "The back office is for the admin role; your role is %(role)s.",
                code="invalid_login",
                params={"role": roles.role_of(user)},
            )


def _admins_only(request) -> bool:
    return roles.has_role(request.user, roles.Role.ADMIN)


# One site serves every app's admin module (recall's too): the role check is set on it here rather
# than by swapping in another AdminSite class, which would take an AdminConfig of our own.
admin.site.has_permission = _admins_only
admin.site.login_form = AdminRoleLoginForm


SHORT_TEXT = 70
SHORT_SCOPE = 20


class MemoryEventInline(admin.TabularInline):
    model = MemoryEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "action", "actor", "reason", "before", "after")
    readonly_fields = fields
    ordering = ("-created_at",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    # Narrow columns, so the list fits beside the back office's two sidebars at 1400 px: the text
    # cut short and wrapping (admin.css), struck through when tombstoned (the status filter picks
    # either), the scope cut short, the day it changed (the exact time on hover). Importance,
    # source and the rest are on the memory's page.
    list_display = ("short_text", "kind", "tier", "short_scope", "pinned", "updated")
    list_filter = ("status", "kind", "tier", "pinned", "source")
    search_fields = ("text", "entity_key", "scope")
    readonly_fields = ("id", "content_hash", "created_at", "updated_at", "access_count", "accessed_at")
    inlines = [MemoryEventInline]
    actions = ["pin_selected", "unpin_selected", "tombstone_selected", "restore_selected"]
    show_full_result_count = False  # a COUNT(*) per page is wasted at 100k rows
    list_per_page = 50
    formfield_overrides = GUARDED_JSON  # metadata typed here is read as the API reads it

    class Media:
        css = {"all": ["memoryui/admin.css"]}

    @admin.display(description="text")
    def short_text(self, obj: Memory) -> str:
        # format_html escapes the text (memory text is untrusted).
        text = Truncator(obj.text).chars(SHORT_TEXT)
        if obj.status == Memory.Status.TOMBSTONED:
            return format_html('<del title="tombstoned">{}</del>', text)
        return text

    @admin.display(description="scope", ordering="scope")
    def short_scope(self, obj: Memory) -> str:
        return Truncator(obj.scope).chars(SHORT_SCOPE)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: Memory) -> str:
        day = f"{timezone.localtime(obj.updated_at):%Y-%m-%d}"
        return format_html('<span title="{}">{}</span>', exact_time(obj.updated_at), day)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # deletes are tombstones

    def save_model(self, request, obj, form, change):
        actor = f"user:{request.user.username}"
        if not change:
            memory, created = writing.write(
                actor=actor,
                **{name: form.cleaned_data[name] for name in Memory.EDITABLE_FIELDS if name in form.cleaned_data},
            )
            obj.pk = memory.pk
            if not created:
                self.message_user(request, "Merged into an existing duplicate memory.", messages.WARNING)
            return
        original = Memory.objects.get(pk=obj.pk)
        fields = {name: form.cleaned_data[name] for name in form.changed_data if name in Memory.EDITABLE_FIELDS}
        original.edit(actor=actor, **fields)
        if "status" in form.changed_data:
            if obj.status == Memory.Status.TOMBSTONED:
                original.tombstone(obj.tombstone_reason or "tombstoned in the back office", actor=actor)
            else:
                original.restore(actor=actor)

    def _apply(self, request, queryset, label: str, action) -> None:
        actor = f"user:{request.user.username}"
        changed = sum(1 for memory in queryset if action(memory, actor))
        self.message_user(request, f"{label} {changed} memories.")

    @admin.action(description="Pin selected memories")
    def pin_selected(self, request, queryset):
        self._apply(request, queryset, "Pinned", lambda m, actor: m.pin(actor=actor))

    @admin.action(description="Unpin selected memories")
    def unpin_selected(self, request, queryset):
        self._apply(request, queryset, "Unpinned", lambda m, actor: m.unpin(actor=actor))

    @admin.action(description="Tombstone selected memories")
    def tombstone_selected(self, request, queryset):
        self._apply(
            request, queryset, "Tombstoned", lambda m, actor: m.tombstone("tombstoned in the back office", actor=actor)
        )

    @admin.action(description="Restore selected memories")
    def restore_selected(self, request, queryset):
        self._apply(request, queryset, "Restored", lambda m, actor: m.restore(actor=actor))


@admin.register(MemoryEvent)
class MemoryEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "action", "actor", "memory", "reason")
    list_filter = ("action",)
    search_fields = ("actor", "reason", "memory__id")
    list_select_related = ("memory",)
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # history is append-only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "key_prefix", "user", "scopes", "access", "created_at", "last_used_at", "revoked_at")
    list_filter = ("access",)
    readonly_fields = ("key_prefix", "key_hash", "created_at", "last_used_at")
    formfield_overrides = GUARDED_JSON
    actions = ["revoke_selected"]

    def has_add_permission(self, request) -> bool:
        return False  # tokens are issued in the Tokens page or with `manage.py api_token`, shown once

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request, queryset):
        revoked = sum(1 for token in queryset if token.revoke())
        self.message_user(request, f"Revoked {revoked} tokens.")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Bookkeeping the application writes itself: visible here, changed only by the app."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(IndexOutbox)
class IndexOutboxAdmin(ReadOnlyAdmin):
    list_display = ("memory_id", "queued_at", "attempts", "last_error")


@admin.register(IndexCheck)
class IndexCheckAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "action", "actor", "ok", "finished_at", "error")
    list_filter = ("action", "ok")


@admin.register(PendingVector)
class PendingVectorAdmin(ReadOnlyAdmin):
    list_display = ("memory_id", "embedder", "content_hash", "created_at")
    exclude = ("vector",)


@admin.register(LexicalEntry)
class LexicalEntryAdmin(ReadOnlyAdmin):
    """The PostgreSQL BM25 index's entries (derived data: `reindex` rebuilds them)."""

    list_display = ("memory_id", "scope", "text_length", "fingerprint")
    list_filter = ("scope",)


@admin.register(DistinctPair)
class DistinctPairAdmin(admin.ModelAdmin):
    """Pairs someone marked as not duplicates; deleting one lets clustering propose it again."""

    list_display = ("scope", "first", "second", "actor", "created_at")
    list_filter = ("scope",)
    readonly_fields = ("scope", "first", "second", "actor", "created_at")

    def has_add_permission(self, request) -> bool:
        return False


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("index", "role", "content", "channel", "source", "tool_call_id")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Transcript)
class TranscriptAdmin(admin.ModelAdmin):
    """Transcripts as agents posted them: read here; messages are never edited (deleting one is allowed)."""

    list_display = ("pk", "scope", "title", "updated_at", "extracted_at")
    search_fields = ("title", "scope")
    readonly_fields = ("scope", "title", "metadata", "created_at", "updated_at", "extracted_at")
    inlines = [MessageInline]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(TaskRun)
class TaskRunAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "status", "actor", "progress_done", "progress_total", "attempts")
    list_filter = ("kind", "status")


# --- the read path: traces (read-only, deletable), profiles and golden sets ---------------------


@admin.register(RecallProfile)
class RecallProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "updated_at")
    search_fields = ("name", "description")
    formfield_overrides = GUARDED_JSON  # JSON typed here is read as the API reads it


@admin.register(RecallTrace)
class RecallTraceAdmin(admin.ModelAdmin):
    """Traces are written by recalls; they can be read and deleted (pruned) here, never edited."""

    list_display = ("created_at", "query", "scope", "source", "actor", "mode", "profile_name")
    list_filter = ("source", "mode")
    search_fields = ("query", "scope", "actor", "note")
    exclude = ("result",)
    readonly_fields = ("fallback_reason", "selected_ids")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(RecallLogEntry)
class RecallLogEntryAdmin(ReadOnlyAdmin):
    """Written by recalls, pruned with agents' traces; read here."""

    list_display = ("created_at", "memory_id", "query", "scope", "source", "profile_name", "trace")
    list_filter = ("source",)
    search_fields = ("query", "scope")
    list_select_related = ("trace",)


class GoldenQueryInline(admin.TabularInline):
    model = GoldenQuery
    extra = 0
    formfield_overrides = GUARDED_JSON


@admin.register(GoldenSet)
class GoldenSetAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "created_at")
    inlines = [GoldenQueryInline]
