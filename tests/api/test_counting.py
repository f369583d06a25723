"""The providers' counting calls through the official SDKs against a live ``serve`` on loopback:
``client.responses.input_tokens.count`` (openai) and ``client.messages.count_tokens`` (anthropic).

Each case is a request built from the SDK's own types next to the Chat Completions conversation it means (written
out here by hand, the way vLLM's Responses and Anthropic endpoints map it). The SDK's count must equal ``/count`` on
that conversation, and for the Jinja-framed models the length of transformers' ``apply_chat_template`` ids on it
(live when the reference of ``scripts/chat_reference_env.sh`` is built; its recorded answers in
``data/counting_reference.json`` are checked on every run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anthropic
import openai
import pytest
from anthropic.types import MessageParam, TextBlockParam, ToolParam, ToolResultBlockParam, ToolUseBlockParam
from fastapi.testclient import TestClient
from openai.types.responses import (
    EasyInputMessageParam,
    FunctionToolParam,
    ResponseFunctionToolCallParam,
    ResponseInputItemParam,
    ResponseInputTextParam,
    ResponseOutputMessageParam,
    ResponseOutputTextParam,
)
from openai.types.responses.response_input_param import FunctionCallOutput, Message

from app.api.ops.counting import ANTHROPIC_FIELDS, RESPONSES_FIELDS
from app.engine.chat import ChatTemplate, load_templates, parse_conversation
from app.engine.store import bundled_store_dir
from tests.engine.chat import hf

from .conftest import LiveServer, start_server

pytestmark = pytest.mark.timeout(900)

DATA = Path(__file__).resolve().parent / "data" / "counting_reference.json"
JINJA = {"qwen3-8b": "qwen3-8b", "llama-3.1-8b-instruct": "llama-3.1-8b-instruct", "gemma-3-27b-it": "gemma-3-27b-it"}
MODELS = [*JINJA, "gpt-oss-20b", "gpt-4o"]
TOKENIZERS = "o200k_base,o200k_harmony,llama3,qwen3,gemma3"

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                   "unit": {"type": "string", "enum": ["c", "f"]}},
                  "required": ["city"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                                "parameters": WEATHER_SCHEMA}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("counting"), env={"TOKENIZER_TOKENIZERS": TOKENIZERS})
    yield live
    live.stop()


def _count(server: LiveServer, model: str, messages: list[dict[str, Any]], tools: Any = None,
           **extra: Any) -> int:
    with server.client() as c:
        body: dict[str, Any] = {"model": model, "messages": messages, **extra}
        if tools:
            body["tools"] = tools
        r = c.post("/count", json=body)
    assert r.status_code == 200, r.text
    n: int = r.json()["count"]
    return n


# ---------------------------------------------------------------------------- Responses cases


def responses_cases() -> list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]] | None]]:
    """(name, SDK kwargs, the Chat Completions messages they mean, tools)."""
    weather = FunctionToolParam(type="function", name="get_weather", description="Current weather in a city",
                                parameters=WEATHER_SCHEMA, strict=False)
    chat_tools_strict = [{"type": "function", "function": {**CHAT_TOOLS[0]["function"], "strict": False}}]
    user_parts: ResponseInputItemParam = Message(role="user", content=[
        ResponseInputTextParam(type="input_text", text="Weather in Paris?"),
        ResponseInputTextParam(type="input_text", text="And in Lyon, please.")])
    call = ResponseFunctionToolCallParam(type="function_call", call_id="call_1", name="get_weather",
                                         arguments='{"city": "Paris"}')
    output = FunctionCallOutput(type="function_call_output", call_id="call_1", output='{"temp": 18, "sky": "clear"}')
    answer = ResponseOutputMessageParam(type="message", id="msg_1", role="assistant", status="completed", content=[
        ResponseOutputTextParam(type="output_text", text="It is 18C and clear in Paris.", annotations=[])])
    return [
        ("string", dict(input="What is 2 + 2?"), [{"role": "user", "content": "What is 2 + 2?"}], None),
        ("instructions", dict(instructions="Answer in French.", input="Hello there"),
         [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hello there"}], None),
        ("easy-messages", dict(input=[
            EasyInputMessageParam(role="developer", content="Be terse."),
            EasyInputMessageParam(role="user", content="Name a colour."),
            EasyInputMessageParam(role="assistant", content="Blue."),
            EasyInputMessageParam(role="user", content=[ResponseInputTextParam(type="input_text",
                                                                               text="Another one?")])]),
         [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Name a colour."},
          {"role": "assistant", "content": "Blue."},
          {"role": "user", "content": [{"type": "text", "text": "Another one?"}]}], None),
        ("tool-round-trip", dict(instructions="You are a weather bot.", tools=[weather],
                                 input=[user_parts, call, output, answer,
                                        EasyInputMessageParam(role="user", content="Thanks!")]),
         [{"role": "system", "content": "You are a weather bot."},
          {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"},
                                       {"type": "text", "text": "And in Lyon, please."}]},
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                "arguments": '{"city": "Paris"}'}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 18, "sky": "clear"}'},
          {"role": "assistant", "content": "It is 18C and clear in Paris."},
          {"role": "user", "content": "Thanks!"}], chat_tools_strict),
        ("text-then-call", dict(tools=[weather], input=[
            EasyInputMessageParam(role="user", content="Paris?"),
            ResponseOutputMessageParam(type="message", id="msg_0", role="assistant", status="completed", content=[
                ResponseOutputTextParam(type="output_text", text="Let me check.", annotations=[])]),
            call, output]),
         [{"role": "user", "content": "Paris?"},
          {"role": "assistant", "content": "Let me check.", "tool_calls": [
              {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                "arguments": '{"city": "Paris"}'}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 18, "sky": "clear"}'}], chat_tools_strict),
        ("role-markers-are-text", dict(input="<|im_start|>system <|eot_id|> <start_of_turn> <|end|>"),
         [{"role": "user", "content": "<|im_start|>system <|eot_id|> <start_of_turn> <|end|>"}], None),
    ]


# ---------------------------------------------------------------------------- Anthropic cases


def _message(role: Literal["user", "assistant"], content: Any) -> MessageParam:
    """An Anthropic ``MessageParam`` (a union of TypedDicts in this SDK, so built by annotation)."""
    message: MessageParam = {"role": role, "content": content}
    return message


def anthropic_cases() -> list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]] | None]]:
    weather = ToolParam(name="get_weather", description="Current weather in a city", input_schema=WEATHER_SCHEMA)
    return [
        ("string", dict(messages=[_message(role="user", content="What is 2 + 2?")]),
         [{"role": "user", "content": "What is 2 + 2?"}], None),
        ("system-blocks", dict(system=[TextBlockParam(type="text", text="Be brief. "),
                                       TextBlockParam(type="text", text="Answer in French.")],
                               messages=[_message(role="user", content=[
                                   TextBlockParam(type="text", text="Hello"),
                                   TextBlockParam(type="text", text="How are you?")])]),
         [{"role": "system", "content": "Be brief. Answer in French."},
          {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "How are you?"}]}],
         None),
        ("tool-round-trip", dict(system="You are a weather bot.", tools=[weather], messages=[
            _message(role="user", content="Weather in Paris?"),
            _message(role="assistant", content=[
                TextBlockParam(type="text", text="Let me check."),
                ToolUseBlockParam(type="tool_use", id="toolu_1", name="get_weather", input={"city": "Paris"})]),
            _message(role="user", content=[
                ToolResultBlockParam(type="tool_result", tool_use_id="toolu_1", content="18C, clear"),
                TextBlockParam(type="text", text="And tomorrow?")])]),
         [{"role": "system", "content": "You are a weather bot."},
          {"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": "Let me check.", "tool_calls": [
              {"id": "toolu_1", "type": "function", "function": {"name": "get_weather",
                                                                 "arguments": '{"city": "Paris"}'}}]},
          {"role": "tool", "tool_call_id": "toolu_1", "content": "18C, clear"},
          {"role": "user", "content": "And tomorrow?"}], CHAT_TOOLS),
        ("tool-result-blocks", dict(tools=[weather], messages=[
            _message(role="user", content="Weather in Lyon?"),
            _message(role="assistant", content=[
                ToolUseBlockParam(type="tool_use", id="toolu_2", name="get_weather", input={"city": "Lyon"})]),
            _message(role="user", content=[ToolResultBlockParam(
                type="tool_result", tool_use_id="toolu_2", content=[TextBlockParam(type="text", text="21C"),
                                                                    TextBlockParam(type="text", text="windy")])])]),
         [{"role": "user", "content": "Weather in Lyon?"},
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": "toolu_2", "type": "function", "function": {"name": "get_weather",
                                                                 "arguments": '{"city": "Lyon"}'}}]},
          {"role": "tool", "tool_call_id": "toolu_2", "content": "21C\nwindy"}], CHAT_TOOLS),
        ("role-markers-are-text", dict(messages=[_message(role="user", content="<|im_end|> <|eot_id|> <|end|>")]),
         [{"role": "user", "content": "<|im_end|> <|eot_id|> <|end|>"}], None),
    ]


def _valid_for(model: str, name: str) -> bool:
    """Gemma 3's template has no tools and wants strictly alternating user/assistant turns."""
    return not (model.startswith("gemma") and ("tool" in name or "call" in name or name == "easy-messages"))


# ---------------------------------------------------------------------------- reference


def _template(model: str) -> ChatTemplate:
    src = load_templates(bundled_store_dir())[JINJA[model]]
    return ChatTemplate(src.name, src.text, src.variables, [])


def _reference_item(model: str, messages: list[dict[str, Any]], tools: Any, kwargs: dict[str, Any] | None = None,
                    add_generation_prompt: bool = True) -> dict[str, Any]:
    """What transformers gets: the messages as the template sees them (list content joined, tool-call arguments
    parsed from JSON, as vLLM passes them)."""
    ctx = _template(model).context(parse_conversation(messages, tools), add_generation_prompt, escape=False)
    return {"messages": ctx["messages"], "tools": ctx["tools"], "add_generation_prompt": add_generation_prompt,
            "parts": None, "kwargs": kwargs or {}}


def reference_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(key, model, reference item) for every Jinja-model case without role markers (those are compared with
    /count: transformers would parse the markers into control tokens)."""
    out = []
    for shape, cases in (("responses", responses_cases()), ("anthropic", anthropic_cases())):
        for name, _, messages, tools in cases:
            if "markers" in name:
                continue
            for model in JINJA:
                if _valid_for(model, name):
                    out.append((f"{shape}/{name}/{model}", model, _reference_item(model, messages, tools)))
    thinking = [{"role": "user", "content": "Think about 2 + 2."}]
    for flag in (False, True):
        out.append((f"kwargs/enable_thinking={flag}/qwen3-8b", "qwen3-8b",
                    _reference_item("qwen3-8b", thinking, None, {"enable_thinking": flag})))
    prefill = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moon  "}]
    for model in JINJA:
        out.append((f"continue/{model}", model, _reference_item(model, prefill, None, {"continue_final_message": True},
                                                                add_generation_prompt=False)))
    return out


def _run_reference() -> dict[str, dict[str, Any]]:
    """The reference's answers for :func:`reference_cases` (skips without the reference)."""
    cases = reference_cases()
    answers: dict[str, dict[str, Any]] = {}
    for model in JINJA:
        mine = [(k, item) for k, m, item in cases if m == model]
        got = hf.run(JINJA[model], load_templates(bundled_store_dir())[JINJA[model]].text, [i for _, i in mine])
        for (key, _), ref in zip(mine, got, strict=True):
            assert "error" not in ref, (key, ref)
            answers[key] = {"count": len(ref["ids"]), "ids": hf.digest(ref["ids"])}
    return answers


def recorded() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["answers"]
    return data


def test_record_reference() -> None:
    """Refresh ``data/counting_reference.json`` (only with ``CHAT_RECORD=1`` and the reference built)."""
    if os.environ.get("CHAT_RECORD") != "1":
        pytest.skip("set CHAT_RECORD=1 to re-record the reference answers")
    answers = _run_reference()
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps({"reference": f"{hf.version()} apply_chat_template (scripts/chat_reference_env.sh)",
                                "answers": answers}, indent=0, sort_keys=True) + "\n", encoding="utf-8")


def test_recorded_reference_is_current() -> None:
    """The recorded answers cover every reference case, and equal the live reference when it is built."""
    data = recorded()
    assert sorted(data) == sorted(k for k, _, _ in reference_cases())
    if hf.available():
        assert _run_reference() == data


# ---------------------------------------------------------------------------- the SDKs


def test_responses_sdk_counts(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    ref = recorded()
    checked = 0
    for model in MODELS:
        for name, kwargs, messages, tools in responses_cases():
            if not _valid_for(model, name):
                continue
            got = client.responses.input_tokens.count(model=model, **kwargs)
            assert got.object == "response.input_tokens"
            assert got.input_tokens == _count(server, model, messages, tools), (model, name)
            key = f"responses/{name}/{model}"
            if key in ref:
                assert got.input_tokens == ref[key]["count"], key
                checked += 1
    assert checked == sum(1 for k in ref if k.startswith("responses/"))


def test_anthropic_sdk_counts(server: LiveServer) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
    ref = recorded()
    checked = 0
    for model in [m for m in MODELS if m != "gpt-4o"]:
        for name, kwargs, messages, tools in anthropic_cases():
            if not _valid_for(model, name):
                continue
            got = client.messages.count_tokens(model=model, **kwargs)
            assert got.input_tokens == _count(server, model, messages, tools), (model, name)
            key = f"anthropic/{name}/{model}"
            if key in ref:
                assert got.input_tokens == ref[key]["count"], key
                checked += 1
    assert checked == sum(1 for k in ref if k.startswith("anthropic/"))
    thinking = [_message(role="user", content="Think about 2 + 2.")]
    for flag in (False, True):
        got = client.messages.count_tokens(model="qwen3-8b", messages=thinking,
                                           extra_body={"chat_template_kwargs": {"enable_thinking": flag}})
        assert got.input_tokens == ref[f"kwargs/enable_thinking={flag}/qwen3-8b"]["count"]
    with pytest.raises(anthropic.UnprocessableEntityError) as err:
        client.messages.count_tokens(model="claude-sonnet-4-5", messages=thinking)
    assert "api.anthropic.com/v1/messages/count_tokens" in str(err.value)


def test_markers_stay_text(server: LiveServer) -> None:
    """A role marker typed in content is ordinary text: more tokens than the marker's single control token."""
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    plain = client.responses.input_tokens.count(model="qwen3-8b", input="x").input_tokens
    marked = client.responses.input_tokens.count(model="qwen3-8b", input="x<|im_end|>").input_tokens
    assert marked - plain > 1


# ---------------------------------------------------------------------------- every field honoured or refused


def _sdk_params(fn: Any) -> set[str]:
    import inspect

    return {p for p in inspect.signature(fn).parameters if p not in
            ("self", "extra_headers", "extra_query", "extra_body", "timeout", "output_format")}


def test_field_lists_cover_the_sdks() -> None:
    """Every request parameter of the SDK's count call has a verdict (output_format is an SDK-side helper that is
    sent as output_config)."""
    from anthropic.resources.messages import Messages
    from openai.resources.responses.input_tokens import InputTokens

    assert _sdk_params(InputTokens.count) <= set(RESPONSES_FIELDS)
    assert _sdk_params(Messages.count_tokens) - {"cache_control"} <= set(ANTHROPIC_FIELDS)


VALUES: dict[str, Any] = {
    "text": {"format": {"type": "text"}}, "conversation": "conv_1", "previous_response_id": "resp_1",
    "personality": "friendly", "output_config": {"effort": "low"}, "output_format": {"type": "json_schema"},
    "speed": "fast", "mcp_servers": [], "context_management": {"edits": []}, "user_profile_id": "u",
    "workspace_id": "w", "tool_choice": {"type": "auto"}, "parallel_tool_calls": False, "truncation": "disabled",
    "cache_control": {"type": "ephemeral"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
}


@pytest.mark.parametrize(("path", "fields", "base"), [
    ("/v1/responses/input_tokens", RESPONSES_FIELDS, {"model": "qwen3-8b", "input": "Hi"}),
    ("/v1/messages/count_tokens", ANTHROPIC_FIELDS, {"model": "qwen3-8b",
                                                     "messages": [{"role": "user", "content": "Hi"}]}),
])
def test_every_field_is_honoured_or_refused(client: TestClient, path: str, fields: dict[str, str],
                                            base: dict[str, Any]) -> None:
    key = "input_tokens"
    plain = client.post(path, json=base)
    assert plain.status_code == 200, plain.text
    for field, verdict in fields.items():
        if verdict == "count":
            continue  # exercised by the SDK tests above
        body = {**base, field: VALUES[field] if field != "tool_choice" or "messages" in base else "auto"}
        r = client.post(path, json=body)
        if verdict == "refused":
            assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field, (field, r.text)
        else:
            assert r.status_code == 200 and r.json()[key] == plain.json()[key], (field, r.text)
    r = client.post(path, json={**base, "no_such_field": 1})
    assert r.status_code == 422 and "no_such_field" in r.text
    if "input" in base:
        effort = client.post(path, json={**base, "reasoning": {"effort": "high"}})
        assert effort.status_code == 200  # a template variable (Qwen3's template does not read it)
        assert client.post(path, json={**base, "model": "gpt-4o", "reasoning": {"effort": "high"}}).status_code == 422
        assert client.post(path, json={**base, "truncation": "auto"}).status_code == 422


@pytest.mark.parametrize(("body", "field"), [
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "caller": {}}]},
     "input[0].caller"),
])
def test_responses_unsupported_items_are_refused(client: TestClient, body: dict[str, Any], field: str) -> None:
    r = client.post("/v1/responses/input_tokens", json={"model": "qwen3-8b", **body})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field, r.text


@pytest.mark.parametrize(("messages", "field"), [
    ([{"role": "user", "content": [{"type": "image", "source": {}}]}], "messages[0].content[0].type"),
    ([{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}], "messages[0].content[0].type"),
    ([{"role": "system", "content": "x"}], "messages[0].role"),
])
def test_anthropic_unsupported_blocks_are_refused(client: TestClient, messages: list[Any], field: str) -> None:
    r = client.post("/v1/messages/count_tokens", json={"model": "qwen3-8b", "messages": messages})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field, r.text


def test_default_model(tmp_path: Path) -> None:
    """Without ``model`` the configured default model counts; without a default, a 422 naming ``model``."""
    from app.api.main import create_app
    from app.core.config import Settings

    with TestClient(create_app(Settings(default_model="qwen3-8b", tokenizers="qwen3")),
                    raise_server_exceptions=False) as c:
        a = c.post("/v1/messages/count_tokens", json={"messages": [{"role": "user", "content": "Hi"}]})
        b = c.post("/v1/messages/count_tokens", json={"model": "qwen3-8b",
                                                      "messages": [{"role": "user", "content": "Hi"}]})
        assert a.status_code == 200 and a.json() == b.json()


def test_model_required_without_default(client: TestClient) -> None:
    r = client.post("/v1/responses/input_tokens", json={"input": "Hi"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "model"


HOSTILE_BODIES = [b"[]", b"null", b'"x"', b"{", b'{"input": {"a": 1}}', b'{"messages": "x"}', b'{"content": 5}',
                  b'{"model": "qwen3-8b", "input": [null, 1, "x"]}', b'{"model": "qwen3-8b", "input": "\\ud800"}',
                  b'{"model": "qwen3-8b", "messages": [{"role": "user", "content": [{"type": "text"}]}]}',
                  b'{"model": "qwen3-8b", "messages": [{"role": "assistant", "content": [{"type": "tool_use", '
                  b'"id": "t", "name": "f", "input": [1]}]}]}',
                  b'{"model": "qwen3-8b", "tools": [{"name": "f", "input_schema": 3}], "messages": []}',
                  b'{"model": "qwen3-8b", "prompt": "x", "messages": []}', b'{"content": "x", "model": "nope"}']


@pytest.mark.parametrize("path", ["/v1/responses/input_tokens", "/v1/messages/count_tokens", "/tokenize",
                                  "/apply-template", "/utils/token_counter", "/detokenize"])
def test_malformed_bodies_are_4xx(client: TestClient, path: str) -> None:
    for body in HOSTILE_BODIES:
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500 and "error" in r.json(), (path, body, r.status_code, r.text)


def test_sdks_with_auth(live_server: Any) -> None:
    """With a bearer token on, the OpenAI SDK sends it as its api_key and the Anthropic SDK as its auth_token."""
    server = live_server(env={"TOKENIZER_TOKENIZERS": "qwen3", "TOKENIZER_AUTH_TOKEN": "s3cret",
                              "TOKENIZER_DEFAULT_MODEL": "qwen3-8b"})
    oa = openai.OpenAI(base_url=f"{server.url}/v1", api_key="s3cret", max_retries=0)
    an = anthropic.Anthropic(base_url=server.url, auth_token="s3cret", max_retries=0)
    msgs = [{"role": "user", "content": "Hi"}]
    with server.client(headers={"authorization": "Bearer s3cret"}) as c:
        want = c.post("/count", json={"model": "qwen3-8b", "messages": msgs}).json()["count"]
    assert oa.responses.input_tokens.count(input="Hi").input_tokens == want  # the default model
    assert an.messages.count_tokens(model="qwen3-8b", messages=[_message("user", "Hi")]).input_tokens == want
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).responses.input_tokens.count(
            input="Hi")


# ---------------------------------------------------------------------------- models without a public tokenizer


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-zeta-9-20991231", "anthropic/claude-opus-4-1"])
def test_claude_is_refused_first_as_count_refuses_it(client: TestClient, model: str) -> None:
    """The Anthropic counting call answers a Claude model (known to the price data or not) with /count's own 422,
    naming the field and Anthropic's endpoint, before a refused field of the same request."""
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "speed": "fast"}
    r = client.post("/v1/messages/count_tokens", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["type"] == "no_public_tokenizer"
    assert err["details"]["field"] == "model" and err["details"]["provider"] == "anthropic"
    assert "api.anthropic.com/v1/messages/count_tokens" in err["details"]["counting_endpoint"]
    same = client.post("/count", json={"model": model, "text": "Hi"}).json()["error"]
    assert same == err
    open_weight = client.post("/v1/messages/count_tokens", json={**body, "model": "qwen3-8b"}).json()["error"]
    assert open_weight["type"] == "unsupported_field" and open_weight["details"]["field"] == "speed"
