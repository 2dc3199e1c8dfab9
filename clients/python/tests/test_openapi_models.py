"""The pydantic models are checked, not generated: each component schema of the committed OpenAPI
document (../openapi.json, kept equal to the live GET /v1/openapi.json by the repository's
test/clients/python-client.test.ts) must have the same shape as its model's JSON Schema: the same
fields, the same required ones, the same types and enum values, all the way down. A field the API
adds, drops, retypes or makes optional fails here until the model follows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, cast

import pytest

from generation_client.types import OPENAPI_COMPONENTS

DOCUMENT = json.loads((Path(__file__).parent.parent / "openapi.json").read_text())
Schema = dict[str, Any]


def shape(schema: Schema, defs: dict[str, Schema]) -> Any:
    """A schema reduced to what a client's types say: structure, types, enums, required fields.
    Descriptions, patterns and bounds are left out (they are validation, not shape)."""
    if "$ref" in schema:
        return shape(defs[str(schema["$ref"]).rsplit("/", 1)[-1]], defs)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return _union([shape(s, defs) for s in schema[union]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([shape(_with_type(schema, k), defs) for k in cast("list[str]", kind)])
    if "const" in schema:
        return ("enum", (schema["const"],))
    if "enum" in schema:
        return ("enum", tuple(sorted(schema["enum"])))
    if kind == "object" or "properties" in schema:
        properties: dict[str, Schema] = schema.get("properties", {})
        if not properties:
            extra = schema.get("additionalProperties", True)
            return ("map", shape(cast("Schema", extra), defs) if isinstance(extra, dict) else "any")
        required = set(schema.get("required", []))
        fields = {
            name: (name in required, shape(p, defs) if name in required else _optional(shape(p, defs)))
            for name, p in properties.items()
        }
        return ("object", tuple(sorted(fields.items())))
    if kind == "array":
        return ("array", shape(schema.get("items", {}), defs))
    if kind == "string" and schema.get("format") == "date-time":
        return "datetime"
    return kind or "any"


def _with_type(schema: Schema, kind: str) -> Schema:
    return {**schema, "type": kind}


def _union_members(member: Any) -> set[Any]:
    if isinstance(member, tuple):
        parts = cast("tuple[Any, ...]", member)
        if parts[0] == "union":
            return set(cast("tuple[Any, ...]", parts[1]))
    return {member}


def _union(members: list[Any]) -> Any:
    flat: set[Any] = set()
    for member in members:
        flat |= _union_members(member)
    if {"integer", "number"} <= flat:
        flat.discard("integer")  # int | float is a JSON number
    return next(iter(flat)) if len(flat) == 1 else ("union", tuple(sorted(flat, key=repr)))


def _optional(member: Any) -> Any:
    """An optional field: Python's None default stands for the field being absent."""
    members = _union_members(member)
    return _union([m for m in members if m != "null"]) if len(members) > 1 else member


def document_shape(document: Schema, name: str) -> Any:
    return shape(document["components"]["schemas"][name], document["components"]["schemas"])


@pytest.mark.parametrize("name", sorted(OPENAPI_COMPONENTS))
def test_each_model_has_the_shape_of_its_schema(name: str) -> None:
    model = OPENAPI_COMPONENTS[name]
    generated = model.model_json_schema(mode="validation")
    assert shape(generated, generated.get("$defs", {})) == document_shape(DOCUMENT, name)


def test_every_component_of_the_document_has_a_model() -> None:
    names = {n for n in DOCUMENT["components"]["schemas"] if not n.startswith("GenerationRequest_")}
    assert names == set(OPENAPI_COMPONENTS)


def test_every_model_request_schema_takes_the_generic_request() -> None:
    """GenerationRequest (model, prompt, images) is the part every model's body shares."""
    schemas = DOCUMENT["components"]["schemas"]
    requests = [s for n, s in schemas.items() if n.startswith("GenerationRequest_")]
    assert requests
    for schema in requests:
        assert {"model", "prompt"} <= set(schema["required"])
        assert schema["properties"]["prompt"]["type"] == "string"
        if "images" in schema["properties"]:
            assert schema["properties"]["images"]["items"]["type"] == "string"


def test_the_client_covers_every_operation_and_list_filter() -> None:
    operations = {(m.upper(), p) for p, item in DOCUMENT["paths"].items() for m in item}
    assert operations == {
        ("POST", "/generations"),  # generations.create / run
        ("GET", "/generations"),  # generations.list / find_by_idempotency_key
        ("POST", "/generations/quote"),  # generations.quote
        ("GET", "/generations/{id}"),  # generations.get / wait
        ("POST", "/generations/{id}/cancel"),  # generations.cancel
        ("GET", "/generations/{id}/events"),  # generations.events (SSE) / event_log (JSON)
        ("GET", "/events"),  # events (SSE)
        ("GET", "/webhooks/secret"),  # webhooks.secret
        ("POST", "/webhooks/secret/rotate"),  # webhooks.rotate_secret
        ("GET", "/credits"),  # credits.get
        ("GET", "/key"),  # key.get
        ("GET", "/models"),  # models.list / get
        ("GET", "/openapi.json"),  # the document itself
        ("POST", "/batches"),  # batches.create
        ("GET", "/batches"),  # batches.list
        ("POST", "/batches/quote"),  # batches.quote
        ("GET", "/batches/{id}"),  # batches.get / wait / download
        ("POST", "/batches/{id}/cancel"),  # batches.cancel
        ("GET", "/batches/{id}/results"),  # batches.results / download
        ("GET", "/batches/{id}/events"),  # batches.events (SSE)
    }
    filters = {p["name"] for p in DOCUMENT["paths"]["/generations"]["get"]["parameters"]}
    assert filters == {"limit", "cursor", "status", "model", "idempotency_key"}


DRIFTS: list[tuple[str, str]] = [
    ("Generation", "a field added"),
    ("Generation", "a field no longer required"),
    ("Generation", "an enum value added"),
    ("CreditBalance", "a field retyped"),
    ("ModelList", "a nested field removed"),
]


def _drift(schemas: dict[str, Schema], name: str, change: str) -> None:
    target = schemas[name]
    if change == "a field added":
        target["properties"]["seed"] = {"type": "integer"}
    elif change == "a field no longer required":
        target["required"].remove("credits")
    elif change == "an enum value added":
        target["properties"]["status"]["enum"].append("paused")
    elif change == "a field retyped":
        target["properties"]["credits"]["type"] = "string"
    else:
        del target["properties"]["data"]["items"]["properties"]["pricing"]["properties"]["by"]


@pytest.mark.parametrize(("name", "change"), DRIFTS)
def test_the_check_sees_drift(name: str, change: str) -> None:
    drifted = copy.deepcopy(DOCUMENT)
    _drift(drifted["components"]["schemas"], name, change)
    generated = OPENAPI_COMPONENTS[name].model_json_schema(mode="validation")
    assert shape(generated, generated.get("$defs", {})) == document_shape(DOCUMENT, name)
    assert shape(generated, generated.get("$defs", {})) != document_shape(drifted, name)
