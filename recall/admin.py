"""Back office for the read path: traces (read-only, deletable), profiles and golden sets."""

from __future__ import annotations

from django.contrib import admin

from memoryui.forms import GUARDED_JSON
from recall.models import GoldenQuery, GoldenSet, RecallProfile, RecallTrace


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


class GoldenQueryInline(admin.TabularInline):
    model = GoldenQuery
    extra = 0
    formfield_overrides = GUARDED_JSON


@admin.register(GoldenSet)
class GoldenSetAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "created_at")
    inlines = [GoldenQueryInline]
