"""The providers' counting calls: OpenAI's ``POST /v1/responses/input_tokens`` and Anthropic's
``POST /v1/messages/count_tokens`` (:mod:`app.api.ops.counting` does the work).

Point the official SDKs at the service: ``OpenAI(base_url="http://HOST/v1").responses.input_tokens.count(...)``,
``Anthropic(base_url="http://HOST").messages.count_tokens(...)`` (with auth on, give the bearer token as the OpenAI
``api_key`` or the Anthropic ``auth_token``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..ops import counting as counting_ops
from .tokenize import ERRORS, run_op

router = APIRouter(tags=["compatibility"])

_TEXT_IS_TEXT = ("Caller text stays text: a special-token string in any field is counted as ordinary characters "
                 "(the providers and vLLM agree on that here: their counts are of text).")


RESPONSES_DESCRIPTION = (
    "`{\"object\": \"response.input_tokens\", \"input_tokens\": N}` for a Responses request. Open-weight models: the "
    "exact tokens of their framed prompt, items mapped to messages as vLLM's Responses endpoint maps them. OpenAI "
    "models: OpenAI's published Chat Completions counting rules (the cookbook's), an estimate of what OpenAI bills. "
    "Fields that cannot be honoured are a 422 naming them. " + _TEXT_IS_TEXT)
MESSAGES_DESCRIPTION = (
    "`{\"input_tokens\": N}` for an Anthropic Messages request to an open-weight model: the exact tokens of its "
    "framed prompt, blocks mapped to messages as vLLM's Anthropic endpoint maps them. Claude models are a 422 naming "
    "Anthropic's own endpoint (Claude's tokenizer is not public). " + _TEXT_IS_TEXT)


def _body(model: type[Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": model.model_json_schema()}}}}


@router.post("/v1/responses/input_tokens", responses=ERRORS, tags=["compatibility"],
             openapi_extra=_body(counting_ops.ResponsesInputTokensRequest), description=RESPONSES_DESCRIPTION,
             summary="OpenAI Responses input-token count (client.responses.input_tokens.count)")
async def responses_input_tokens(request: Request) -> Response:
    return await run_op(request, counting_ops.responses_input_tokens, "/v1/responses/input_tokens")


@router.post("/v1/messages/count_tokens", responses=ERRORS, tags=["compatibility"],
             openapi_extra=_body(counting_ops.AnthropicCountTokensRequest), description=MESSAGES_DESCRIPTION,
             summary="Anthropic Messages token count (client.messages.count_tokens)")
async def messages_count_tokens(request: Request) -> Response:
    return await run_op(request, counting_ops.anthropic_count_tokens, "/v1/messages/count_tokens")
