"""Request and response schemas of the HTTP API.

Requests are validated strictly (``strict=True``: no ``"1"`` -> 1 or ``true`` -> 1 coercion; ``extra="forbid"``:
a misspelt field is an error, not silently ignored). Response models document the shapes in OpenAPI; handlers
serialize responses themselves (off the event loop), so the models are not used at run time for output.

Special tokens never come from text: ``text``, ``texts`` and ``parts[].text`` are always ordinary text. They enter
only through ``special_tokens.prefix/suffix`` or ``parts[].special``, by name.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: A tokenizer, model or special-token name: short, so that errors which echo it stay short.
Name = Annotated[str, Field(min_length=1, max_length=256)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class SpecialTokens(_Strict):
    """Special tokens, by name, around the text (around each text of a batch)."""

    prefix: list[Name] = Field(default_factory=list, description="special tokens put before the text, in order")
    suffix: list[Name] = Field(default_factory=list, description="special tokens put after the text, in order")


class Part(_Strict):
    """One element of ``parts``: exactly one of ``text`` (ordinary text) or ``special`` (a special token's name)."""

    text: str | None = None
    special: Name | None = None

    @model_validator(mode="after")
    def _one(self) -> Part:
        if (self.text is None) == (self.special is None):
            raise ValueError("a part needs exactly one of 'text' or 'special'")
        return self


class _Target(_Strict):
    tokenizer: Name | None = Field(None, description="tokenizer name or alias (see GET /tokenizers)",
                                  examples=["cl100k_base"])
    model: Name | None = Field(None, description="model name, resolved to its tokenizer through the model table",
                              examples=["gpt-4o"])

    @model_validator(mode="after")
    def _target(self) -> Any:
        if (self.tokenizer is None) == (self.model is None):
            raise ValueError("give exactly one of 'tokenizer' or 'model'")
        return self


class _TextInput(_Target):
    text: str | None = Field(None, description="one text (always ordinary text)")
    texts: list[str] | None = Field(None, description="a batch of texts (non-empty)")
    parts: list[Part] | None = Field(None, description="an ordered mix of texts and special tokens")
    special_tokens: SpecialTokens | None = None
    add_special_tokens: bool = Field(
        False, description="wrap the input in the tokenizer's own template (BOS/EOS, [CLS] ... [SEP]; see "
        "`template` in GET /tokenizers/{name}), outside `special_tokens`; default false: only what you name"
    )
    report_special_lookalikes: bool = Field(
        False, description="count occurrences of special-token strings inside the text (they are encoded as text)"
    )

    @model_validator(mode="after")
    def _input(self) -> Any:
        given = [k for k in ("text", "texts", "parts") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'text', 'texts' or 'parts'")
        if self.texts is not None and not self.texts:
            raise ValueError("'texts' must not be empty")
        if self.parts is not None and not self.parts:
            raise ValueError("'parts' must not be empty")
        return self


class EncodeRequest(_TextInput):
    """Body of ``POST /encode``."""

    return_tokens: bool = Field(False, description="also return each token as text (or base64 bytes when the "
                                "token is not valid UTF-8 on its own)")
    return_offsets: bool = Field(False, description="also return each token's [start, end) offsets in characters "
                                 "(Unicode code points) of its text")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"tokenizer": "cl100k_base", "text": "hello world"},
        {"model": "gpt-4o", "texts": ["first", "second"], "return_tokens": True},
        {"tokenizer": "llama3", "parts": [{"special": "<|start_header_id|>"}, {"text": "user"},
                                          {"special": "<|end_header_id|>"}, {"text": "\n\nHi!"},
                                          {"special": "<|eot_id|>"}]},
        {"tokenizer": "cl100k_base", "text": "hi", "special_tokens": {"suffix": ["<|endoftext|>"]}},
    ]})


class CountRequest(_TextInput):
    """Body of ``POST /count``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"model": "gpt-4o", "text": "How many tokens is this?"},
        {"tokenizer": "o200k_base", "texts": ["a", "b c"]},
    ]})


class DecodeRequest(_Target):
    """Body of ``POST /decode``: exactly one of ``ids`` or ``batch``."""

    ids: list[int] | None = Field(None, description="token ids")
    batch: list[list[int]] | None = Field(None, description="several id lists (non-empty)")
    skip_special_tokens: bool = Field(False, description="leave special tokens out of the text")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"tokenizer": "cl100k_base", "ids": [15339, 1917]},
        {"tokenizer": "cl100k_base", "batch": [[15339], [1917, 100257]], "skip_special_tokens": True},
    ]})

    @model_validator(mode="after")
    def _input(self) -> Any:
        if (self.ids is None) == (self.batch is None):
            raise ValueError("give exactly one of 'ids' or 'batch'")
        if self.batch is not None and not self.batch:
            raise ValueError("'batch' must not be empty")
        return self


# ---------------------------------------------------------------- responses (documentation)


class TokenPiece(BaseModel):
    """One token's bytes: ``text`` when they are valid UTF-8 on their own, else ``bytes`` (base64)."""

    text: str | None = None
    bytes: str | None = None


class ModelUsage(BaseModel):
    """What the model table says about the requested model, applied to the tokens counted."""

    name: str
    context_window: int | None = Field(None, description="tokens, input and output together; null if unknown")
    max_output_tokens: int | None = None
    fits: bool | None = Field(None, description="the text's tokens are within the context window (for a batch: "
                              "every text's); null if the window is unknown")
    fits_each: list[bool] | None = Field(None, description="per text of a batch")
    currency: str = "USD"
    input_price_per_million: float | None = None
    output_price_per_million: float | None = None
    estimated_input_cost: float | None = Field(None, description="tokens counted x input price (the whole batch)")
    price_source: str | None = None
    price_as_of: str | None = None
    price_note: str | None = None


class EncodeResult(BaseModel):
    ids: list[int]
    count: int
    tokens: list[TokenPiece] | None = None
    offsets: list[tuple[int, int]] | None = None
    special_lookalikes: int | None = None


class EncodeResponse(EncodeResult):
    """``POST /encode`` with ``text`` or ``parts``."""

    tokenizer: str
    model: ModelUsage | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [{"tokenizer": "cl100k_base", "ids": [15339, 1917],
                                                               "count": 2}]})


class EncodeBatchResponse(BaseModel):
    """``POST /encode`` with ``texts``."""

    tokenizer: str
    model: ModelUsage | None = None
    results: list[EncodeResult]
    total: int


class CountResponse(BaseModel):
    """``POST /count`` with ``text`` or ``parts``."""

    tokenizer: str
    model: ModelUsage | None = None
    count: int
    special_lookalikes: int | None = None


class CountBatchResponse(BaseModel):
    """``POST /count`` with ``texts``."""

    tokenizer: str
    model: ModelUsage | None = None
    counts: list[int]
    total: int
    special_lookalikes: list[int] | None = None


class DecodeResponse(BaseModel):
    tokenizer: str
    text: str


class DecodeBatchResponse(BaseModel):
    tokenizer: str
    texts: list[str]


class TokenizerSummary(BaseModel):
    name: str
    aliases: list[str]
    kind: str
    backend: str = Field(description="engine backend serving it: native (compiled core) or python")
    vocab_size: int
    special_tokens_count: int
    sha256: str
    source: str
    license: str
    models: list[str]
    description: str


class TokenizerDetail(TokenizerSummary):
    special_tokens: dict[str, int] = Field(description="special tokens (name -> id); never matched in text")
    added_tokens: dict[str, int] = Field(description="non-special added tokens (string -> id), matched in text as "
                                         "the tokenizer's reference implementation matches them")
    template: str = Field(description="what add_special_tokens=true puts around a text, e.g. `<s> $text`")
    pattern: str


class TokenizerList(BaseModel):
    tokenizers: list[TokenizerSummary]


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    tokenizers: list[str]


class ErrorBody(BaseModel):
    type: str = Field(description="machine-readable error type, e.g. unknown_tokenizer, invalid_token_id")
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    """Every error response has this shape."""

    error: ErrorBody


REQUEST_MODELS: tuple[type[BaseModel], ...] = (EncodeRequest, CountRequest, DecodeRequest)
