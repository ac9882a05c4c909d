"""API tokens for agents and scripts: only a hash of the key is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from memoryui import rules
from memoryui.models.fields import StoredJSONDecoder

TOKEN_PREFIX = "mui_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def usable(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A bearer token for agents and scripts; only its hash is stored.

    `access` says whether the token may change anything (`write`) or only read (`read`); a token
    never does more than its owner's role allows at the time of the request (`memoryui.roles`).
    """

    class Access(models.TextChoices):
        READ = "read"
        WRITE = "write"

    name = models.CharField(max_length=100)
    key_prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(decoder=StoredJSONDecoder, default=list, blank=True, help_text="Empty = every scope.")
    access = models.CharField(
        max_length=5,
        choices=Access.choices,
        default=Access.WRITE,
        help_text="read: only reads (and recalls); write: may also change memories, within its owner's role.",
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @classmethod
    def issue(
        cls, *, user, name: str, scopes: list[str] | None = None, access: str = Access.WRITE
    ) -> tuple[ApiToken, str]:
        """Create a token and return it with the raw key, which is never stored or shown again.

        Who may mint which token is the caller's to check (`memoryui.roles.mint_refusal`).
        """
        name = (name or "").strip()
        if not name:
            raise rules.MemoryValidationError({"name": ["is required"]})
        if access not in cls.Access.values:
            raise rules.MemoryValidationError({"access": [f"{access!r} is not one of: {', '.join(cls.Access.values)}"]})
        normalized = []
        for scope in scopes or []:
            try:
                normalized.append(rules.normalize_scope(scope))
            except rules.ScopeError as exc:
                raise rules.MemoryValidationError({"scopes": [f"{scope!r}: {exc}"]}) from None
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name,
            key_prefix=raw[: len(TOKEN_PREFIX) + 8],
            key_hash=hash_token(raw),
            scopes=sorted(set(normalized)),
            access=access,
            user=user,
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> ApiToken | None:
        token = cls.objects.usable().select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.user.is_active:
            return None
        token.mark_used()
        return token

    def mark_used(self) -> None:
        """Record that the token is being used now."""
        now = timezone.now()
        # Write at most once a minute: a busy agent should not turn every read into a write.
        if self.last_used_at is None or now - self.last_used_at > timedelta(minutes=1):
            type(self).objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def can_write(self) -> bool:
        """The token's own access; its owner's role limits it further (`memoryui.roles`)."""
        return self.access == self.Access.WRITE

    @property
    def allowed_scopes(self) -> list[str] | None:
        """The scopes this token may see, or None for every scope."""
        return list(self.scopes) or None

    def revoke(self) -> bool:
        if self.revoked_at:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True
