"""The OpenAPI document (app/api/openapi.py, app/api/schemas.py): every field described, examples for every input
shape that the service accepts and the schema validates, and the schema's ``oneOf`` rules agreeing with the
service's validation on every combination of the exactly-one fields."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from app.api.schemas import (
    REQUEST_MODELS,
    CountRequest,
    DecodeRequest,
    DetokenizeRequest,
    EncodeRequest,
    Part,
    TeiDecodeRequest,
    TeiTokenizeRequest,
    TokenizeRequest,
)

#: Where each request model is posted, and (PATHS) its path in the document.
ROUTES = {EncodeRequest: "/encode", CountRequest: "/count", DecodeRequest: "/decode", TokenizeRequest: "/tokenize",
          DetokenizeRequest: "/detokenize", TeiTokenizeRequest: "/tei/llama-3.1-8b-instruct/tokenize",
          TeiDecodeRequest: "/tei/llama-3.1-8b-instruct/decode"}
PATHS = {**ROUTES, TeiTokenizeRequest: "/tei/{model}/tokenize", TeiDecodeRequest: "/tei/{model}/decode"}
#: A valid value for each field of an exactly-one group (the other fields of a request are left out). The model
#: has public chat ids (gpt-oss), so 'messages' is valid on /encode as well as /count.
VALUES: dict[str, Any] = {"tokenizer": "cl100k_base", "model": "gpt-oss-20b", "text": "hello world",
                          "texts": ["a", "b c"], "parts": [{"text": "hi"}, {"special": "<|endoftext|>"}],
                          "ids": [15339, 1917], "batch": [[15339], [1917]], "special": "<|endoftext|>",
                          "messages": [{"role": "user", "content": "hi"}], "prompt": "hello world"}


@pytest.fixture(scope="module")
def spec(client: TestClient) -> dict[str, Any]:
    return client.get("/openapi.json").json()


def _validator(spec: dict[str, Any], model: str) -> jsonschema.Draft202012Validator:
    """A validator for one component schema, resolving ``#/components/...`` refs inside the whole document."""
    schema = {**spec, "$ref": f"#/components/schemas/{model}"}
    return jsonschema.Draft202012Validator(schema)


def _properties(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, schema in spec["components"]["schemas"].items():
        for prop, sub in schema.get("properties", {}).items():
            yield name, prop, sub


def test_every_field_has_a_description(spec: dict[str, Any]) -> None:
    props = list(_properties(spec))
    assert len(props) > 60  # requests and responses, not just a few
    missing = [f"{name}.{prop}" for name, prop, sub in props if not sub.get("description")]
    assert not missing, f"fields without a description: {missing}"
    for name, schema in spec["components"]["schemas"].items():
        assert schema.get("description"), f"schema {name} has no description"


def test_only_the_real_error_shape_is_documented(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    refs = {media["schema"].get("$ref") for ops in spec["paths"].values() for op in ops.values()
            for code, resp in op["responses"].items() if code[0] in "45" for media in resp.get("content", {}).values()}
    assert refs == {"#/components/schemas/ErrorResponse"}


@pytest.mark.parametrize("model", REQUEST_MODELS, ids=lambda m: m.__name__)
def test_examples_cover_every_input_shape_and_are_accepted(client: TestClient, spec: dict[str, Any],
                                                           model: type) -> None:
    examples = spec["components"]["schemas"][model.__name__]["examples"]
    validator = _validator(spec, model.__name__)
    for example in examples:
        validator.validate(example)
        r = client.post(ROUTES[model], json=example)
        assert r.status_code == 200, (example, r.text)
    for group in model.exactly_one:  # type: ignore[attr-defined]
        for field in group:
            assert any(field in e for e in examples), f"{model.__name__}: no example uses {field!r}"
    if model in (EncodeRequest, CountRequest):
        assert {"text", "texts", "parts"} <= {k for e in examples for k in e}
    body = spec["paths"][PATHS[model]]["post"]["requestBody"]["content"]["application/json"]
    assert [e["value"] for e in body["examples"].values()] == examples  # offered by name in the docs pages


@pytest.mark.parametrize("model", [m for m in (*REQUEST_MODELS, Part) if m.exactly_one],  # type: ignore[attr-defined]
                         ids=lambda m: m.__name__)
def test_oneof_agrees_with_validation(client: TestClient, spec: dict[str, Any], model: type) -> None:
    """For every combination of present/absent input fields (those of the exactly-one groups and any other field
    with a value in VALUES): the schema accepts the body exactly when the service does (a part is checked inside
    an /encode body). A new input shape goes into VALUES and into its model's ``exactly_one`` group."""
    groups = model.exactly_one  # type: ignore[attr-defined]
    assert groups, f"{model.__name__} states no exactly-one rule"
    schema = spec["components"]["schemas"][model.__name__]
    assert ("oneOf" in schema) if len(groups) == 1 else all("oneOf" in c for c in schema["allOf"])
    validator = _validator(spec, model.__name__)
    grouped = {f for g in groups for f in g}
    assert grouped <= set(VALUES), f"add a value for {sorted(grouped - set(VALUES))} to VALUES"
    fields = [f for f in model.model_fields if f in VALUES]  # grouped fields and any other input field we know
    seen_ok = seen_bad = 0
    for present in itertools.product((False, True), repeat=len(fields)):
        body = {f: VALUES[f] for f, on in zip(fields, present, strict=True) if on}
        schema_ok = validator.is_valid(body)
        if model is Part:
            r = client.post("/encode", json={"tokenizer": "cl100k_base", "parts": [body]})
        else:
            r = client.post(ROUTES[model], json=body)
        assert r.status_code in (200, 422), (body, r.text)
        assert schema_ok == (r.status_code == 200), (model.__name__, body, schema_ok, r.text)
        seen_ok += schema_ok
        seen_bad += not schema_ok
    assert seen_ok and seen_bad


def test_exactly_one_fields_are_not_nullable(spec: dict[str, Any]) -> None:
    """A schema-driven client must omit an absent field: ``null`` is not in the schema of any exactly-one field."""
    schemas = spec["components"]["schemas"]
    for model in (*REQUEST_MODELS, Part):
        for field in (f for g in model.exactly_one for f in g):  # type: ignore[attr-defined]
            prop = schemas[model.__name__]["properties"][field]
            assert "anyOf" not in prop and prop.get("type") != "null" and "default" not in prop, (model, field)
