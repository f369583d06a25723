"""Request and response schemas of the HTTP API.

Requests are validated strictly (``strict=True``: no ``"1"`` -> 1 or ``true`` -> 1 coercion; ``extra="forbid"``:
a misspelt field is an error, not silently ignored). Response models document the shapes in OpenAPI; handlers
serialize responses themselves (off the event loop), so the models are not used at run time for output.

Special tokens never come from text: ``text``, ``texts`` and ``parts[].text`` are always ordinary text. They enter
only through ``special_tokens.prefix/suffix`` or ``parts[].special``, by name.

Every field has a description, and each "exactly one of these fields" rule of a request model (its
``exactly_one`` groups; the validators enforce them) is stated in the JSON schema as ``oneOf``, with those fields
typed non-null (omit a field rather than send ``null``), so a schema-driven client builds only requests the service
accepts.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.pricing.money import ROUNDING_RULE

#: Groups of field names (see ``_Strict.exactly_one``).
Groups = tuple[tuple[str, ...], ...]

#: A tokenizer, model or special-token name: short, so that errors which echo it stay short.
Name = Annotated[str, Field(min_length=1, max_length=256)]


def _non_null(prop: dict[str, Any]) -> None:
    """Drop the ``null`` branch (and the ``null`` default) of an optional field's schema, in place."""
    branches = [b for b in prop.get("anyOf", ()) if b != {"type": "null"}]
    if "anyOf" in prop:
        del prop["anyOf"]
        if len(branches) == 1:
            prop.update(branches[0])
        else:
            prop["anyOf"] = branches
    if prop.get("default", 0) is None:
        del prop["default"]


def state_exactly_one(schema: dict[str, Any], groups: Groups) -> None:
    """Add to an object schema, in place, one ``oneOf`` of ``required`` per group (under ``allOf`` if several)."""
    clauses = []
    for group in groups:
        for name in group:
            _non_null(schema["properties"][name])
        clauses.append({"oneOf": [{"required": [name]} for name in group]})
    if len(clauses) == 1:
        schema.update(clauses[0])
    elif clauses:
        schema["allOf"] = clauses


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    #: Groups of fields of which a request gives exactly one (validated below; stated as ``oneOf`` in the schema).
    exactly_one: ClassVar[Groups] = ()

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        state_exactly_one(handler.resolve_ref_schema(schema), cls.exactly_one)
        return schema


class SpecialTokens(_Strict):
    """Special tokens, by name, around the text (around each text of a batch)."""

    prefix: list[Name] = Field(default_factory=list, description="special tokens put before the text, in order")
    suffix: list[Name] = Field(default_factory=list, description="special tokens put after the text, in order")


class Part(_Strict):
    """One element of ``parts``: exactly one of ``text`` (ordinary text) or ``special`` (a special token's name)."""

    exactly_one: ClassVar[Groups] = (("text", "special"),)

    text: str | None = Field(None, description="ordinary text (a special token's string in it is plain text)")
    special: Name | None = Field(None, description="a special token, by name (see GET /tokenizers/{name})",
                                 examples=["<|endoftext|>"])

    @model_validator(mode="after")
    def _one(self) -> Part:
        if (self.text is None) == (self.special is None):
            raise ValueError("a part needs exactly one of 'text' or 'special'")
        return self


class _Target(_Strict):
    exactly_one: ClassVar[Groups] = (("tokenizer", "model"),)

    tokenizer: Name | None = Field(None, description="tokenizer name or alias (see GET /tokenizers)",
                                  examples=["cl100k_base"])
    model: Name | None = Field(None, description="model name, resolved to its tokenizer through the model table",
                              examples=["gpt-4o"])

    @model_validator(mode="after")
    def _target(self) -> Any:
        if (self.tokenizer is None) == (self.model is None):
            raise ValueError("give exactly one of 'tokenizer' or 'model'")
        return self


class Truncate(_Strict):
    """Keep at most ``max_tokens`` tokens: ``right`` cuts the end, ``left`` the start (messages: oldest first)."""

    max_tokens: int = Field(ge=0, description="the most tokens to keep (special tokens and framing included)")
    side: Literal["right", "left"] = Field("right", description="which end of a text to cut; for messages, which end "
                                           "of the message that has to be shortened")


class SampleOptions(_Strict):
    """Subword regularisation: encode one randomly drawn segmentation instead of the best one, reproducibly for a
    ``seed``. Unigram tokenizers take ``alpha``/``nbest``, BPE tokenizers ``dropout``; giving the other family's
    option, or sampling with a tokenizer that cannot (WordPiece), is a 422 ``invalid_sample``."""

    seed: int = Field(0, ge=0, le=2**64 - 1, description="seed of the generator: the same seed, text and tokenizer "
                      "give the same ids (a batch's item i uses seed + i)")
    alpha: float | None = Field(None, ge=0, allow_inf_nan=False, description="Unigram: smoothing of the draw, "
                                "probability proportional to exp(alpha * score); 0 = every segmentation alike, large "
                                "= the best one (default 0.1)")
    nbest: int | None = Field(None, ge=-1, le=512, description="Unigram: -1 = draw from every segmentation (the "
                              "lattice), 1 = the best one, 2..512 = among that many best (default -1)")
    dropout: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="BPE: probability of "
                                  "skipping each merge (BPE-dropout); 0 = the ordinary encoding, 1 = characters or "
                                  "bytes (default 0.1)")

    @model_validator(mode="after")
    def _nbest(self) -> SampleOptions:
        if self.nbest == 0:
            raise ValueError("nbest must be -1 (the whole lattice) or 1..512")
        return self


class _TextInput(_Target):
    exactly_one: ClassVar[Groups] = (*_Target.exactly_one, ("text", "texts", "parts", "messages"))

    text: str | None = Field(None, description="one text (always ordinary text)")
    texts: list[str] | None = Field(None, description="a batch of texts (non-empty)")
    parts: list[Part] | None = Field(None, description="an ordered mix of texts and special tokens")
    special_tokens: SpecialTokens | None = Field(None, description="special tokens by name around the text (around "
                                                 "each text of a batch; around all the parts)")
    add_special_tokens: bool = Field(
        False, description="wrap the input in the tokenizer's own template (BOS/EOS, [CLS] ... [SEP]; see "
        "`template` in GET /tokenizers/{name}), outside `special_tokens`; default false: only what you name"
    )
    report_special_lookalikes: bool = Field(
        False, description="count occurrences of special-token strings inside the text (they are encoded as text)"
    )
    messages: list[dict[str, Any]] | None = Field(None, description="a chat conversation (OpenAI Chat Completions "
                                                  "shape); needs 'model', which decides the framing (GET /models)")
    tools: list[dict[str, Any]] | None = Field(None, description="OpenAI function tools (with 'messages')")
    add_generation_prompt: bool = Field(True, description="with 'messages': end the prompt with the assistant's "
                                        "turn header")
    max_output_tokens: int | None = Field(None, ge=1, description="output tokens to reserve and price (default: "
                                          "the model's maximum)")
    cached_tokens: int | None = Field(None, ge=0, description="with 'model': tokens of each prompt read from the "
                                      "provider's prompt cache (priced at the cache-read rate; at most the count)")
    provider: Name | None = Field(None, description="with 'model': price at this genai-prices provider instead of "
                                  "the model table's (GET /models says which applies), or 'provider:model' to name "
                                  "that provider's own model id", examples=["novita:meta-llama/llama-3.3-70b-instruct"])
    service_tier: Literal["default", "flex", "priority", "fast", "batch"] | None = Field(
        None, description="with 'model': price at this service tier (batch: the batch API's price); a tier the "
        "model has no price for is a 422 naming those it has")
    truncate: Truncate | None = Field(None, description="cut to at most max_tokens ('text' or 'messages')")
    sample: SampleOptions | None = Field(None, description="subword regularisation: one sampled segmentation per "
                                         "text instead of the best one (off by default; 'text', 'texts' or 'parts', "
                                         "without offsets or truncation)")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = super().__get_pydantic_json_schema__(core_schema, handler)
        # 'messages' needs 'model' (the model decides the framing); 'tools' go with 'messages'
        handler.resolve_ref_schema(schema)["dependentRequired"] = {"messages": ["model"], "tools": ["messages"]}
        return schema

    @model_validator(mode="after")
    def _input(self) -> Any:
        texts, parts, messages = self.texts, self.parts, self.messages
        if (self.text is not None) + (texts is not None) + (parts is not None) + (messages is not None) != 1:
            raise ValueError("give exactly one of 'text', 'texts', 'parts' or 'messages'")
        if messages is None and self.tools is not None:
            raise ValueError("'tools' goes with 'messages'")
        if texts is not None and not texts:
            raise ValueError("'texts' must not be empty")
        if parts is not None and not parts:
            raise ValueError("'parts' must not be empty")
        if self.sample is not None and (self.messages is not None or self.truncate is not None
                                        or getattr(self, "return_offsets", False)):
            raise ValueError("'sample' goes with 'text', 'texts' or 'parts', without 'truncate' or 'return_offsets'")
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
        {"model": "gpt-oss-20b", "messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hi!"}]},
        {"model": "gpt-4o", "text": "a long document ...", "truncate": {"max_tokens": 3, "side": "right"}},
        {"tokenizer": "xlm-roberta", "text": "subword regularisation", "sample": {"seed": 7, "alpha": 0.1,
                                                                                   "nbest": -1}},
        {"tokenizer": "cl100k_base", "texts": ["BPE-dropout", "per text"], "sample": {"seed": 1, "dropout": 0.1}},
    ]})


class CountRequest(_TextInput):
    """Body of ``POST /count``."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"model": "gpt-4o", "text": "How many tokens is this?"},
        {"tokenizer": "o200k_base", "texts": ["a", "b c"]},
        {"tokenizer": "cl100k_base", "parts": [{"text": "hello"}, {"special": "<|endoftext|>"}]},
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                                     "parameters": {"type": "object", "properties": {
                                                         "city": {"type": "string", "description": "City"}}}}}],
         "max_output_tokens": 500},
        {"tokenizer": "mistral-v1", "text": "tokens of one sampled segmentation", "sample": {"seed": 3,
                                                                                              "dropout": 0.1}},
    ]})


class DecodeRequest(_Target):
    """Body of ``POST /decode``: exactly one of ``ids`` or ``batch``."""

    exactly_one: ClassVar[Groups] = (*_Target.exactly_one, ("ids", "batch"))

    ids: list[int] | None = Field(None, description="token ids")
    batch: list[list[int]] | None = Field(None, description="several id lists (non-empty)")
    skip_special_tokens: bool = Field(False, description="leave special tokens out of the text")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"tokenizer": "cl100k_base", "ids": [15339, 1917]},
        {"model": "gpt-4o", "ids": [24912, 2375]},
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

_TOKENIZER = "canonical name of the tokenizer used"
_MODEL = "the model table's facts applied to this count (only when the request named a model)"


class TokenPiece(BaseModel):
    """One token's bytes: ``text`` when they are valid UTF-8 on their own, else ``bytes`` (base64)."""

    text: str | None = Field(None, description="the token's bytes as text, when they are valid UTF-8 on their own")
    bytes: str | None = Field(None, description="the token's bytes, base64, when they are not valid UTF-8 on their "
                              "own (part of a multi-byte character)")


class ModelUsage(BaseModel):
    """What the model table and the price data say about the requested model, applied to the tokens counted.

    Money: exact decimal strings, never rounded (see ``x-rounding``)."""

    model_config = ConfigDict(json_schema_extra={"x-rounding": ROUNDING_RULE})

    name: str = Field(description="the model name as requested")
    context_window: int | None = Field(None, description="tokens, input and output together; null if unknown")
    max_output_tokens: int | None = Field(None, description="the most tokens the model writes in one response; "
                                          "null if unknown")
    fits: bool | None = Field(None, description="prompt + output_tokens_reserved are within the context window (for "
                              "a batch: every text's); null if the window is unknown")
    fits_each: list[bool] | None = Field(None, description="per text of a batch")
    output_tokens_reserved: int | None = Field(None, description="max_output_tokens of the request, else the "
                                               "model's maximum; 'fits' reserves them and they are priced as output")
    cached_tokens: int = Field(0, description="the request's cached_tokens (per text), priced as cache reads")
    currency: str = Field("USD", description="currency of every amount")
    input_price_per_million: str | None = Field(None, description="input rate applied (exact decimal string); "
                                                "null without a price")
    cached_input_price_per_million: str | None = Field(None, description="cache-read rate applied, where the "
                                                       "provider has one")
    output_price_per_million: str | None = Field(None, description="output rate applied")
    estimated_input_cost: str | None = Field(None, description="input, cache-read and cache-write cost of the whole "
                                             "batch (exact decimal string)")
    estimated_output_cost: str | None = Field(None, description="output_tokens_reserved priced per text (the worst "
                                              "case); null if nothing is reserved")
    estimated_total_cost: str | None = Field(None, description="input + output; null if nothing is reserved")
    price_source: str | None = Field(None, description="genai-prices provider and model id priced")
    price_as_of: str | None = Field(None, description="the price data's version (GET /models: price_data)")
    price: dict[str, Any] | None = Field(None, description="the breakdown: provider, model, tokens, breakdown "
                                         "{input, cache_read, cache_write[_5m|_1h], output, other}, total, tier "
                                         "(applied and why; a list per text for a batch), service_tier, data_version")
    price_unavailable: str | None = Field(None, description="why there is no price (then every amount is null)")


class EncodeResult(BaseModel):
    """The tokens of one text (or of the parts)."""

    ids: list[int] = Field(description="token ids, special tokens of prefix, parts and suffix included")
    count: int = Field(description="number of ids")
    tokens: list[TokenPiece] | None = Field(None, description="each token's bytes (with return_tokens)")
    offsets: list[tuple[int, int]] | None = Field(None, description="each token's [start, end) in characters of the "
                                                  "text (of the parts' texts joined); special tokens are empty spans "
                                                  "(with return_offsets)")
    special_lookalikes: int | None = Field(None, description="special-token strings found in the text, encoded as "
                                           "text (with report_special_lookalikes)")


class EncodeResponse(EncodeResult):
    """``POST /encode`` with ``text`` or ``parts``."""

    tokenizer: str = Field(description=_TOKENIZER)
    model: ModelUsage | None = Field(None, description=_MODEL)

    model_config = ConfigDict(json_schema_extra={"examples": [{"tokenizer": "cl100k_base", "ids": [15339, 1917],
                                                               "count": 2}]})


class EncodeBatchResponse(BaseModel):
    """``POST /encode`` with ``texts``."""

    tokenizer: str = Field(description=_TOKENIZER)
    model: ModelUsage | None = Field(None, description=_MODEL)
    results: list[EncodeResult] = Field(description="one result per text, in order")
    total: int = Field(description="sum of the counts")


class CountResponse(BaseModel):
    """``POST /count`` with ``text`` or ``parts``."""

    tokenizer: str = Field(description=_TOKENIZER)
    model: ModelUsage | None = Field(None, description=_MODEL)
    count: int = Field(description="number of tokens, special tokens included")
    special_lookalikes: int | None = Field(None, description="special-token strings found in the text, encoded as "
                                           "text (with report_special_lookalikes)")


class CountBatchResponse(BaseModel):
    """``POST /count`` with ``texts``."""

    tokenizer: str = Field(description=_TOKENIZER)
    model: ModelUsage | None = Field(None, description=_MODEL)
    counts: list[int] = Field(description="number of tokens of each text, in order")
    total: int = Field(description="sum of the counts")
    special_lookalikes: list[int] | None = Field(None, description="per text: special-token strings found in it "
                                                 "(with report_special_lookalikes)")


class DecodeResponse(BaseModel):
    """``POST /decode`` with ``ids``."""

    tokenizer: str = Field(description=_TOKENIZER)
    text: str = Field(description="the decoded text (invalid UTF-8 replaced by U+FFFD)")


class DecodeBatchResponse(BaseModel):
    """``POST /decode`` with ``batch``."""

    tokenizer: str = Field(description=_TOKENIZER)
    texts: list[str] = Field(description="one decoded text per id list, in order")


class TokenizerSummary(BaseModel):
    """One tokenizer of the store."""

    name: str = Field(description="canonical name")
    aliases: list[str] = Field(description="other names it answers to")
    kind: str = Field(description="tokenizer family, e.g. byte_bpe")
    backend: str = Field(description="engine backend serving it: native (compiled core) or python")
    vocab_size: int = Field(description="number of token ids, special tokens included")
    special_tokens_count: int = Field(description="number of special tokens")
    sha256: str = Field(description="sha256 of its artifact file, verified at start-up")
    source: str = Field(description="where the artifact comes from")
    license: str = Field(description="the artifact's licence")
    reference: str = Field(description="the library (and version) whose ids this tokenizer's equal, as tested, "
                           "e.g. `tiktoken 0.14.0`, `tokenizers 0.23.3`, `sentencepiece 0.2.3`; empty when the "
                           "store does not say")
    models: list[str] = Field(description="model names that resolve to it")
    description: str = Field(description="a short description")


class TokenizerDetail(TokenizerSummary):
    """One tokenizer with its special and added tokens, template and pre-tokenizer pattern."""

    special_tokens: dict[str, int] = Field(description="special tokens (name -> id); never matched in text")
    added_tokens: dict[str, int] = Field(description="non-special added tokens (string -> id), matched in text as "
                                         "the tokenizer's reference implementation matches them")
    template: str = Field(description="what add_special_tokens=true puts around a text, e.g. `<s> $text`")
    pattern: str = Field(description="the pre-tokenizer's regular expression")


class TokenizerList(BaseModel):
    """``GET /tokenizers``."""

    tokenizers: list[TokenizerSummary] = Field(description="every tokenizer, in manifest order")


class Health(BaseModel):
    """``GET /healthz``."""

    status: str = Field(description="always ok")


class Ready(BaseModel):
    """``GET /readyz``."""

    status: str = Field(description="ready")
    tokenizers: list[str] = Field(description="names of the loaded and verified tokenizers")


class ErrorBody(BaseModel):
    """What went wrong."""

    type: str = Field(description="machine-readable error type, e.g. unknown_tokenizer, invalid_token_id")
    message: str = Field(description="a human-readable explanation")
    details: Any = Field(None, description="structured facts about the error (names, ids, limits), or null")


class ErrorResponse(BaseModel):
    """Every error response has this shape."""

    error: ErrorBody = Field(description="the error")


class _Compat(_Strict):
    """Request bodies of other servers' shapes: strict types; unknown fields are ignored (TEI's bodies), unless the
    model refuses them (vLLM's: ``extra="forbid"``, so no option that changes a count is silently dropped)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class TokenizeRequest(_Compat):
    """Body of the vLLM-compatible ``POST /tokenize``: exactly one of ``prompt`` or ``messages``, with vLLM's fields
    (``vllm/entrypoints/serve/tokenize/protocol.py``: ``TokenizeCompletionRequest`` | ``TokenizeChatRequest``).

    Unlike vLLM (which ignores unknown fields), a field this service does not know, or one of the other form's
    fields (``tools`` with ``prompt``), is a 422 naming it."""

    exactly_one: ClassVar[Groups] = (("prompt", "messages"),)
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"model": "llama-3.1-8b-instruct", "prompt": "Hello!", "return_token_strs": True},
        {"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hello!"}]},
        {"model": "qwen3-8b", "messages": [{"role": "user", "content": "Hello!"}],
         "chat_template_kwargs": {"enable_thinking": False}},
        {"model": "qwen3-8b", "messages": [{"role": "user", "content": "Write a haiku."},
                                           {"role": "assistant", "content": "Autumn moon"}],
         "add_generation_prompt": False, "continue_final_message": True},
    ]})

    model: Name | None = Field(None, description="model name (snapshots resolve), see GET /models; optional when "
                               "the service has a default model (TOKENIZER_DEFAULT_MODEL)")
    prompt: str | None = Field(None, description="one text (always ordinary text)")
    messages: list[dict[str, Any]] | None = Field(None, description="a chat conversation, framed as the model "
                                                  "frames it")
    tools: list[dict[str, Any]] | None = Field(None, description="OpenAI function tools (with 'messages')")
    add_generation_prompt: bool | None = Field(None, description="with 'messages': end with the assistant's turn "
                                               "header (default true; false when continue_final_message is set)")
    continue_final_message: bool = Field(False, description="with 'messages': leave the last message open (the "
                                         "model continues it); Jinja-framed models only")
    add_special_tokens: bool | None = Field(None, description="the tokenizer's own template (BOS for Llama 3): "
                                            "default true with 'prompt', false with 'messages' (then added on top "
                                            "of the chat framing, as vLLM does)")
    return_token_strs: bool | None = Field(False, description="also return each token as text (base64 of its "
                                           "bytes when they are not valid UTF-8 on their own)")
    chat_template: str | None = Field(None, description="a caller's Jinja chat template: refused (422) unless the "
                                      "operator allows it (TOKENIZER_ALLOW_REQUEST_CHAT_TEMPLATE); rendered in the "
                                      "sandbox then")
    chat_template_kwargs: dict[str, Any] | None = Field(None, description="extra chat-template variables, e.g. "
                                                        "{\"enable_thinking\": false} for Qwen3; Jinja-framed models "
                                                        "only")
    mm_processor_kwargs: dict[str, Any] | None = Field(None, description="multimodal options: only null or {} "
                                                       "(this service counts text)")
    media_io_kwargs: dict[str, Any] | None = Field(None, description="multimodal options: only null or {}")

    @model_validator(mode="after")
    def _input(self) -> Any:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        return self


class DetokenizeRequest(_Compat):
    """Body of the vLLM-compatible ``POST /detokenize``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"model": "llama-3.1-8b-instruct", "tokens": [128000, 9906, 0]}]})

    model: Name | None = Field(None, description="model name (snapshots resolve), see GET /models; optional with a "
                               "default model")
    tokens: list[int] = Field(description="token ids")


class TeiTokenizeRequest(_Compat):
    """Body of TEI's ``POST /tei/{model}/tokenize``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"inputs": "Hello!"},
                                                              {"inputs": ["a", "b c"], "add_special_tokens": False}]})

    inputs: str | list[str] = Field(description="one text or a batch (always ordinary text)")
    add_special_tokens: bool = Field(True, description="the tokenizer's own template (BOS for Llama 3)")
    prompt_name: str | None = Field(None, description="not supported (no prompts are configured): must be absent")


class TeiDecodeRequest(_Compat):
    """Body of TEI's ``POST /tei/{model}/decode``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"ids": [128000, 9906, 0]},
                                                              {"ids": [[9906], [0]], "skip_special_tokens": False}]})

    ids: list[int] | list[list[int]] = Field(description="token ids, or several lists of them")
    skip_special_tokens: bool = Field(True, description="leave special tokens out of the text")


REQUEST_MODELS: tuple[type[BaseModel], ...] = (EncodeRequest, CountRequest, DecodeRequest, TokenizeRequest,
                                               DetokenizeRequest, TeiTokenizeRequest, TeiDecodeRequest)
