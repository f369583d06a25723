"""The OpenAPI document as the service really behaves: request bodies from the request models (with their
examples offered by name), and no error shape the service never sends.

FastAPI documents its own validation-error body (``HTTPValidationError``) for routes with parameters; this service
answers every error, validation included, with :class:`~app.api.schemas.ErrorResponse`, so those references are
replaced by it and the unused schemas dropped.
"""

from __future__ import annotations

import warnings
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .price_schemas import PriceRequest
from .schemas import REQUEST_MODELS

_FASTAPI_ERRORS = ("HTTPValidationError", "ValidationError")
#: Request models whose ``model`` may be left out when the service has a default model (``TOKENIZER_DEFAULT_MODEL``).
MODEL_OPTIONAL_WITH_DEFAULT = ("TokenizeRequest", "DetokenizeRequest")
_REF = "#/components/schemas/{model}"


def build(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app`` (see the module docstring)."""
    with warnings.catch_warnings():  # the probes' HEAD operations (dropped below) share an id
        warnings.filterwarnings("ignore", message="Duplicate Operation ID (healthz|readyz)_")
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    for item in schema.get("paths", {}).values():
        item.pop("head", None)  # HEAD mirrors GET on the probes (one route for both, for a complete Allow)
    models: tuple[type[BaseModel], ...] = (*REQUEST_MODELS, PriceRequest)
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(defs.get("$defs", {}))
    settings = getattr(app.state, "settings", None)
    if settings is not None and settings.default_model is None:  # no default model: these requests must name one
        for name in MODEL_OPTIONAL_WITH_DEFAULT:
            required = components[name].setdefault("required", [])
            if "model" not in required:
                required.insert(0, "model")
    fastapi_error = _REF.format(model=_FASTAPI_ERRORS[0])
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                for media in response.get("content", {}).values():
                    if media.get("schema", {}).get("$ref") == fastapi_error:
                        media["schema"] = {"$ref": _REF.format(model="ErrorResponse")}
    for name in _FASTAPI_ERRORS:
        components.pop(name, None)
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            _named_examples(operation, components)
    return schema


def _named_examples(operation: dict[str, Any], components: dict[str, Any]) -> None:
    """Copy a request model's examples onto its operation's JSON body as named examples (the docs pages offer
    them in a menu: one per input shape), each summarized by the fields it uses."""
    media = operation.get("requestBody", {}).get("content", {}).get("application/json")
    ref = (media or {}).get("schema", {}).get("$ref", "")
    examples = components.get(ref.rsplit("/", 1)[-1], {}).get("examples") if ref else None
    if media is not None and examples:
        media["examples"] = {f"example {i}": {"summary": " + ".join(example), "value": example}
                             for i, example in enumerate(examples, 1)}
