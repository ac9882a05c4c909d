"""The OpenAPI schema states the rules the API enforces, so that a client (or a fuzzer) that
follows the schema is never refused, and one that breaks it always is.

- Request bodies take no key they do not declare (`additionalProperties: false`).
- Every text in a request holds no NUL (`NO_NUL`); a text that may not be blank holds a
  character other than white space (`NON_BLANK`, DRF trims it); memory text and search queries
  hold a visible character (`VISIBLE_TEXT`, memoryui.untrusted); a scope matches
  `rules.SCOPE_PATTERN`, wherever it is taken.
- Pages and page sizes are whole numbers of 1 or more; `ordering` names the orderable fields.
- Every operation documents the answers any request can get: 401, 413 for a body over
  `DATA_UPLOAD_MAX_MEMORY_SIZE`, 414 for a request line over the server's limit, 429 past a
  throttle, 503 when the database is unavailable; and 400 and 404 where they apply.

The patterns are ECMA-262 and Python regexes alike (no `\\s`, `\\w` or `\\d`, whose meaning
differs between the two), and the server checks the same ones.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers

from api import filters
from api.serializers import BULK_ACTIONS
from ingest import ingestion
from memoryui import rules, untrusted

# What Python's str.strip() removes (str.isspace()), which is what DRF trims from text.
_WHITE_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NO_NUL = "^[^\\x00]*$"
NON_BLANK = f"^[^\\x00]*[^\\x00{_WHITE_SPACE}][^\\x00]*$"
VISIBLE_TEXT = f"^[^\\x00]*[^{untrusted.INVISIBLE_CLASS}][^\\x00]*$"
SCOPE = rules.SCOPE_PATTERN
# A memory id as people type it (memoryui.memory_ids): a full id, with or without its dashes, or
# the first 8 or more of its 32 hex digits.
MEMORY_ID = "^[0-9a-fA-F]{8}(?:-?[0-9a-fA-F]){0,24}$"
MEMORY_ID_MAX_LENGTH = 36
ENTITY_KEY = f"^[a-z][a-z0-9_.-]*:[^\\x00{_WHITE_SPACE}](?:[^\\x00]*[^\\x00{_WHITE_SPACE}])?$"

SCOPE_FIELDS = {"scope"}


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's schema, with the rules the serializers enforce beyond their fields."""

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction != "request":
            return schema
        serializer = serializer if isinstance(serializer, serializers.BaseSerializer) else serializer()
        if not getattr(serializer, "accepts_unknown_keys", False):
            schema.setdefault("additionalProperties", False)
        for name, field in serializer.fields.items():
            prop = schema.get("properties", {}).get(name)
            if prop is None or field.read_only:
                continue
            _constrain_text(name, field, prop)
        return schema


def _constrain_text(name: str, field, prop: dict) -> None:
    if isinstance(field, serializers.ListField | serializers.ListSerializer) and not field.allow_empty:
        prop["minItems"] = max(prop.get("minItems", 0), 1)
    if isinstance(field, serializers.ListSerializer) and field.max_length is not None:
        prop["maxItems"] = field.max_length
    if name in SCOPE_FIELDS and isinstance(field, serializers.CharField):
        prop.update(pattern=SCOPE, maxLength=rules.SCOPE_MAX_LENGTH)
        return
    if isinstance(field, serializers.ListField) and name == "scopes":
        prop.setdefault("items", {}).update(type="string", pattern=SCOPE, maxLength=rules.SCOPE_MAX_LENGTH)
        return
    if isinstance(field, serializers.ListField) and isinstance(field.child, serializers.CharField):
        _constrain_text("", field.child, prop.setdefault("items", {"type": "string"}))
        return
    if not isinstance(field, serializers.CharField) or isinstance(field, serializers.ChoiceField):
        return
    if "pattern" in prop or prop.get("format") or "enum" in prop:
        return
    blank_refused = not field.allow_blank and field.trim_whitespace
    prop["pattern"] = NON_BLANK if blank_refused else NO_NUL


def postprocess(result, generator, request, public):
    """A drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    components = result.get("components", {}).get("schemas", {})
    for component in ("MemoryInputRequest", "PatchedMemoryInputRequest"):
        properties = components.get(component, {}).get("properties", {})
        if "text" in properties:
            properties["text"]["pattern"] = VISIBLE_TEXT
        if "entity_key" in properties:  # type:value, or null or "" for no key
            properties["entity_key"] = {
                "anyOf": [
                    {"type": "string", "pattern": ENTITY_KEY, "maxLength": rules.ENTITY_KEY_MAX_LENGTH},
                    {"type": "string", "maxLength": 0},
                ],
                "nullable": True,
                "description": properties["entity_key"].get("description", ""),
            }
        if "expires_at" in properties:  # a date-time, or null or "" for no expiry
            expires = properties["expires_at"]
            properties["expires_at"] = {
                "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 0}],
                "nullable": True,
                "description": expires.get("description", "When the memory expires; null or empty: never."),
            }
    if "MessageInRequest" in components:
        _message_rules(components)
    recall_request = components.get("RecallRequestRequest", {}).get("properties", {})
    if "query" in recall_request:  # searchindex.search.clean_query: as search's q, a visible character
        recall_request["query"]["pattern"] = VISIBLE_TEXT
    if "why" in recall_request:
        recall_request["why"].update(pattern=MEMORY_ID, maxLength=MEMORY_ID_MAX_LENGTH)
    golden_query = components.get("GoldenQueryRequest")
    if golden_query is not None and "expected_ids" in golden_query.get("properties", {}):
        golden_query["properties"]["expected_ids"]["items"] = {
            "type": "string",
            "pattern": MEMORY_ID,
            "maxLength": MEMORY_ID_MAX_LENGTH,
        }
        # Memories to find, or `silent: true` and none: never an empty list alone.
        golden_query["oneOf"] = [
            {"properties": {"silent": {"const": True}, "expected_ids": {"maxItems": 0}}, "required": ["silent"]},
            {"properties": {"silent": {"const": False}, "expected_ids": {"minItems": 1}}, "required": ["expected_ids"]},
        ]
    # Metadata: any JSON object whose keys and texts, at any depth, hold no NUL.
    components["MetadataValue"] = {
        "anyOf": [
            {"type": "string", "pattern": NO_NUL},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "array", "items": {"$ref": "#/components/schemas/MetadataValue"}},
            {"$ref": "#/components/schemas/Metadata"},
        ],
        "nullable": True,
    }
    components["Metadata"] = {
        "type": "object",
        "propertyNames": {"pattern": NO_NUL},
        "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"},
        "description": f"Any JSON object, nested at most {untrusted.MAX_JSON_DEPTH} levels; no key or text "
        "holds a NUL.",
    }
    for name, component in components.items():
        if name.endswith("Request") and "metadata" in component.get("properties", {}):
            component["properties"]["metadata"] = {"$ref": "#/components/schemas/Metadata"}
    for component in ("MemoryInputRequest", "PatchedMemoryInputRequest"):
        if "metadata" in components.get(component, {}).get("properties", {}):
            components[component]["properties"]["metadata"]["description"] = (
                f"At most {rules.MAX_METADATA_BYTES:,} bytes as compact JSON in UTF-8 (64 KiB): a memory's metadata "
                "goes out with it in every list, recall and export."
            )
    bulk = components.get("BulkActionRequest")
    if bulk is not None:
        # What some actions need besides the ids: a reason to tombstone, a tier to set.
        needs = {"tombstone": "reason", "set_tier": "tier"}
        others = [action for action in BULK_ACTIONS if action not in needs]
        bulk["oneOf"] = [
            *({"properties": {"action": {"enum": [action]}}, "required": [field]} for action, field in needs.items()),
            {"properties": {"action": {"enum": others}}},
        ]
        bulk["properties"]["reason"]["pattern"] = NON_BLANK
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            _parameters(path, operation)
            _responses(operation)
    _nullable_as_type(result)
    return result


def _nullable_as_type(node) -> None:
    """OpenAPI 3.1 says "may be null" in JSON Schema's words: `nullable: true` becomes a `null` type."""
    if isinstance(node, list):
        for item in node:
            _nullable_as_type(item)
        return
    if not isinstance(node, dict):
        return
    if {} in node.get("oneOf", []):
        # drf-spectacular writes a nullable JSON field as oneOf [{}, null], which null matches twice.
        del node["oneOf"]
    if node.pop("nullable", False):
        if isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
        elif "anyOf" in node:
            node["anyOf"].append({"type": "null"})
        elif "enum" in node:
            node["enum"] = [*node["enum"], None]
        else:
            node["anyOf"] = [{k: node.pop(k) for k in list(node) if k != "description"}, {"type": "null"}]
    for value in node.values():
        _nullable_as_type(value)


def _parameters(path: str, operation: dict) -> None:
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        schema = parameter.setdefault("schema", {"type": "string"})
        name = parameter["name"]
        if name in ("page", "page_size"):
            schema.update(type="integer", minimum=1)
        elif name in SCOPE_FIELDS and schema.get("type") == "array":
            schema.setdefault("items", {}).update(type="string", pattern=SCOPE, maxLength=rules.SCOPE_MAX_LENGTH)
        elif name in SCOPE_FIELDS:
            schema.update(pattern=SCOPE, maxLength=rules.SCOPE_MAX_LENGTH)
        elif name == "ordering" and path == "/api/memories/":
            schema.update(pattern=filters.ordering_pattern(filters.MEMORY_ORDERINGS))
        elif name == "q" and path.endswith("/search/"):
            schema.update(pattern=VISIBLE_TEXT)
            parameter["required"] = True
            parameter["allowEmptyValue"] = False
            continue
        elif schema.get("type") == "string" and not ({"enum", "pattern", "format"} & set(schema)):
            schema["pattern"] = NO_NUL
        if not parameter.get("required"):
            # An optional parameter given empty (`?scope=&kind=`, as a form sends it) is left out.
            parameter["allowEmptyValue"] = True


_ANSWERS = {
    400: "invalid: details name each bad field or parameter",
    401: "unauthorized: no session, or a missing, invalid or revoked token",
    404: "not_found: an unknown id, a scope the caller cannot see, or a page past the last one",
    413: "too_large: a body over the documented limit",
    414: "uri_too_long: a request line over the server's limit (answered by the web server, as JSON)",
    429: "throttled: past the caller's rate; Retry-After says when to come back",
    503: "backend_unavailable: the database or an index did not answer; Retry-After says when to retry",
}


def _responses(operation: dict) -> None:
    responses = operation["responses"]
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    wanted = [401, 414, 429, 503]
    if operation.get("parameters") or operation.get("requestBody"):
        wanted.append(400)
    if operation.get("requestBody"):
        wanted.append(413)
    if any(p.get("name") == "page" for p in operation.get("parameters", [])) or any(
        p.get("in") == "path" for p in operation.get("parameters", [])
    ):
        wanted.append(404)
    for code in wanted:
        responses.setdefault(str(code), {"description": _ANSWERS[code], **error})


def _message_rules(components: dict) -> None:
    """A transcript and its messages as ingest.ingestion checks them: what a message may hold
    depends on its role (only an assistant makes tool calls, only a tool result answers one, a
    user message and an assistant message without tool calls need content)."""
    transcript = components["TranscriptInRequest"]["properties"]
    transcript["id"].update(pattern=f"^(?:{VISIBLE_TEXT[1:-1]})?$", nullable=True)  # empty or null: none given
    transcript["title"].update(maxLength=ingestion.MAX_TITLE_CHARS, pattern=NO_NUL)
    for field in (transcript["id"], transcript["title"]):
        field.pop("minLength", None)
    message = components["MessageInRequest"]
    props = message["properties"]
    props["content"].update(maxLength=ingestion.MAX_CONTENT_CHARS, nullable=True)
    props["tool_call_id"].update(maxLength=ingestion.MAX_TOOL_CALL_CHARS, nullable=True)
    props["channel"].update(maxLength=40, nullable=True)
    props["source"] = {"type": "string", "enum": [*ingestion.SOURCES, ""], "nullable": True}
    props["created_at"] = {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 0}],
        "nullable": True,
    }
    props["tool_calls"]["nullable"] = True
    for name in ("content", "tool_call_id", "channel"):  # empty is as good as absent
        props[name].pop("minLength", None)
    message["required"] = ["role"]
    blank = {"type": "string", "pattern": f"^[{_WHITE_SPACE}]*$", "nullable": True}
    said = {"type": "string", "pattern": NON_BLANK}
    no_calls = {"type": "array", "maxItems": 0, "nullable": True}
    message["oneOf"] = [
        {
            "properties": {"role": {"enum": ["user"]}, "content": said, "tool_calls": no_calls, "tool_call_id": blank},
            "required": ["content"],
        },
        {
            "properties": {"role": {"enum": ["assistant"]}, "tool_call_id": blank},
            "anyOf": [
                {"properties": {"content": said}, "required": ["content"]},
                {"properties": {"tool_calls": {"type": "array", "minItems": 1}}, "required": ["tool_calls"]},
            ],
        },
        {"properties": {"role": {"enum": ["tool"]}, "tool_calls": no_calls}},
        {"properties": {"role": {"enum": ["system"]}, "tool_calls": no_calls, "tool_call_id": blank}},
    ]
    call = components["ToolCallRequest"]
    call["required"] = ["name"]
    # Other keys of a tool call are the agent's own, and any JSON (texts and keys without NUL).
    call["propertyNames"] = {"pattern": NO_NUL}
    call["additionalProperties"] = {"$ref": "#/components/schemas/MetadataValue"}
    call["properties"]["arguments"] = {"$ref": "#/components/schemas/MetadataValue"}
    call["properties"]["name"].update(pattern=NON_BLANK, maxLength=ingestion.MAX_TOOL_CALL_CHARS)
    call["properties"]["id"].update(maxLength=ingestion.MAX_TOOL_CALL_CHARS)
    call["properties"]["id"].pop("minLength", None)  # empty: numbered call_<n>
