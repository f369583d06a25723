"""The inference-server shapes: vLLM's /tokenize, /detokenize and /tokenizer_info (with vLLM's options), TEI's
/tei/{model}/tokenize and /decode."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.core.config import Settings
from app.engine import get_tokenizer
from app.engine.chat import load_templates
from app.engine.store import bundled_store_dir
from tests.engine.chat import hf

from .test_counting import recorded


def test_vllm_tokenize_and_detokenize(client: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    r = client.post("/tokenize", json={"model": "llama-3.1-8b-instruct", "prompt": "Hi <|eot_id|> there",
                                       "return_token_strs": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tokens"] == tokenizer.encode("Hi <|eot_id|> there", add_special_tokens=True)
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] == 131072
    assert len(body["token_strs"]) == body["count"]
    assert not any(tokenizer.is_special(i) for i in body["tokens"][1:])  # the marker stays text
    plain = client.post("/tokenize", json={"model": "llama-3.1-8b-instruct", "prompt": "Hi",
                                           "add_special_tokens": False}).json()
    assert plain["tokens"] == tokenizer.encode("Hi")
    chat = client.post("/tokenize", json={"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hi"}]})
    assert chat.json()["tokens"] == client.post("/encode", json={"model": "gpt-oss-20b", "messages": [
        {"role": "user", "content": "Hi"}]}).json()["ids"]
    d = client.post("/detokenize", json={"model": "llama-3.1-8b-instruct", "tokens": body["tokens"]})
    text = tokenizer.decode(body["tokens"])
    assert d.json() == {"prompt": text, "content": text}  # + llama.cpp
    bad = client.post("/detokenize", json={"model": "gpt-4o", "tokens": [10 ** 9]})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_token_id"
    assert client.post("/tokenize", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}
                       ).status_code == 422
    assert client.post("/tokenize", json={"model": "gpt-4o"}).status_code == 422
    # a field this service cannot honour is refused by name, never ignored
    extra = client.post("/tokenize", json={"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hi"}],
                                           "chat_template_kwargs": {"x": 1}, "mm_processor_kwargs": None})
    assert extra.status_code == 422 and extra.json()["error"]["details"]["field"] == "chat_template_kwargs"
    same = client.post("/tokenize", json={"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "Hi"}],
                                          "mm_processor_kwargs": {}, "media_io_kwargs": None})
    assert same.status_code == 200 and same.json()["tokens"] == chat.json()["tokens"]
    unknown = client.post("/tokenize", json={"model": "gpt-4o", "prompt": "x", "no_such_option": 1})
    assert unknown.status_code == 422 and "no_such_option" in unknown.text
    assert client.post("/tokenize", json={"model": "gpt-4o", "prompt": 5}).status_code == 422  # types stay strict


def test_tei_tokenize(client: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    text = "Hé <|eot_id|> 😀 日本"
    r = client.post("/tei/llama-3.1-8b-instruct/tokenize", json={"inputs": text})
    assert r.status_code == 200, r.text
    (tokens,) = r.json()
    assert [t["id"] for t in tokens] == tokenizer.encode(text, add_special_tokens=True)
    assert tokens[0] == {"id": 128000, "text": "<|begin_of_text|>", "special": True, "start": None, "stop": None}
    data = text.encode()
    for t in tokens[1:]:
        assert not t["special"] and t["text"] == data[t["start"]:t["stop"]].decode("utf-8", errors="replace")
    assert tokens[-1]["stop"] == len(data)
    batch = client.post("/tei/cl100k_base/tokenize", json={"inputs": ["a b", "c"], "add_special_tokens": False})
    assert [[t["id"] for t in row] for row in batch.json()] == [get_tokenizer("cl100k_base").encode(x)
                                                                for x in ("a b", "c")]
    assert client.post("/tei/gpt-4o-2024-08-06/tokenize", json={"inputs": "x"}).json()[0][0]["id"] == get_tokenizer(
        "o200k_base").encode("x")[0]
    assert client.post("/tei/nope/tokenize", json={"inputs": "x"}).status_code == 404
    assert client.post("/tei/gpt-4o/tokenize", json={"inputs": "x", "prompt_name": "query"}).status_code == 422
    assert client.post("/tei/gpt-4o/tokenize", json={"inputs": 3}).status_code == 422


def test_tei_decode(client: TestClient) -> None:
    tokenizer = get_tokenizer("llama3")
    ids = tokenizer.encode("Hi there", add_special_tokens=True)
    assert client.post("/tei/llama3/decode", json={"ids": ids}).json() == ["Hi there"]
    both = client.post("/tei/llama3/decode", json={"ids": [ids, ids[1:]], "skip_special_tokens": False}).json()
    assert both == [tokenizer.decode(ids), "Hi there"]
    bad = client.post("/tei/llama3/decode", json={"ids": [10 ** 9]})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_token_id"


def _tokenize(client: TestClient, **body: Any) -> Any:
    return client.post("/tokenize", json=body)


def test_vllm_chat_options_equal_transformers(client: TestClient) -> None:
    """chat_template_kwargs and continue_final_message: counts equal transformers' apply_chat_template with the same
    kwargs (recorded answers of tests/api/test_counting.py's reference cases)."""
    ref = recorded()
    thinking = [{"role": "user", "content": "Think about 2 + 2."}]
    counts = {}
    for flag in (False, True):
        r = _tokenize(client, model="qwen3-8b", messages=thinking, chat_template_kwargs={"enable_thinking": flag})
        assert r.status_code == 200, r.text
        counts[flag] = r.json()["count"]
        assert counts[flag] == ref[f"kwargs/enable_thinking={flag}/qwen3-8b"]["count"]
        assert hf.digest(r.json()["tokens"]) == ref[f"kwargs/enable_thinking={flag}/qwen3-8b"]["ids"]
    assert counts[False] > counts[True]  # the empty think block
    prefill = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moon  "}]
    for model in ("qwen3-8b", "llama-3.1-8b-instruct", "gemma-3-27b-it"):
        for agp in ({"add_generation_prompt": False}, {}):  # continue_final_message alone implies no generation prompt
            r = _tokenize(client, model=model, messages=prefill, continue_final_message=True, **agp)
            assert r.status_code == 200, r.text
            assert hf.digest(r.json()["tokens"]) == ref[f"continue/{model}"]["ids"], model
    both = _tokenize(client, model="qwen3-8b", messages=prefill, continue_final_message=True,
                     add_generation_prompt=True)
    assert both.status_code == 422 and both.json()["error"]["details"]["field"] == "continue_final_message"
    for model in ("gpt-oss-20b", "gpt-4o"):
        r = _tokenize(client, model=model, messages=prefill, continue_final_message=True)
        assert r.status_code == 422


def test_vllm_add_special_tokens_with_messages(client: TestClient) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    plain = _tokenize(client, model="llama-3.1-8b-instruct", messages=msgs).json()["tokens"]
    doubled = _tokenize(client, model="llama-3.1-8b-instruct", messages=msgs, add_special_tokens=True).json()
    assert doubled["tokens"] == [128000, *plain]  # on top of the template's own BOS, as vLLM does


def test_vllm_fields_of_the_other_form_are_refused(client: TestClient) -> None:
    for field, value in (("tools", []), ("add_generation_prompt", True), ("continue_final_message", False),
                         ("chat_template_kwargs", {}), ("chat_template", "x"), ("mm_processor_kwargs", None),
                         ("media_io_kwargs", None)):
        r = _tokenize(client, model="gpt-4o", prompt="x", **{field: value})
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field, (field, r.text)
    mm = _tokenize(client, model="qwen3-8b", messages=[{"role": "user", "content": "x"}],
                   mm_processor_kwargs={"fps": 1})
    assert mm.status_code == 422 and mm.json()["error"]["details"]["field"] == "mm_processor_kwargs"


def test_vllm_caller_chat_template(client: TestClient) -> None:
    """Refused by default; with the operator setting, rendered in the sandbox (the model's own template text gives
    the model's ids; a hostile one is refused)."""
    msgs = [{"role": "user", "content": "Hi"}]
    source = load_templates(bundled_store_dir())["qwen3-8b"].text
    r = _tokenize(client, model="qwen3-8b", messages=msgs, chat_template=source)
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "chat_template"
    with TestClient(create_app(Settings(allow_request_chat_template=True, tokenizers="qwen3",
                                        default_model="qwen3-8b")), raise_server_exceptions=False) as c:
        own = _tokenize(c, messages=msgs, chat_template=source)
        assert own.status_code == 200 and own.json()["tokens"] == _tokenize(c, messages=msgs).json()["tokens"]
        other = _tokenize(c, messages=msgs, chat_template="{% for m in messages %}[{{ m.content }}]{% endfor %}")
        assert other.json()["tokens"] == get_tokenizer("qwen3").encode("[Hi]")
        evil = _tokenize(c, messages=msgs, chat_template="{{ ''.__class__.__mro__ }}")
        assert evil.status_code == 422
        assert _tokenize(c, prompt="Hi").json()["tokens"] == get_tokenizer("qwen3").encode("Hi")  # default model
        ids = get_tokenizer("qwen3").encode("Hi")
        assert c.post("/detokenize", json={"tokens": ids}).json()["prompt"] == "Hi"
        info = c.get("/tokenizer_info").json()
        assert info["eos_token"] == "<|im_end|>" and info["chat_template"] == source
        assert info["model_max_length"] == 32768 and info["added_tokens_decoder"]["151645"]["content"] == "<|im_end|>"
    assert client.get("/tokenizer_info").status_code == 422  # no default model
    assert client.get("/tokenizer_info", params={"model": "llama-3.1-8b-instruct"}).json()["bos_token"] == (
        "<|begin_of_text|>")


#: Every field of vLLM's /tokenize (``vllm/entrypoints/serve/tokenize/protocol.py``: TokenizeCompletionRequest |
#: TokenizeChatRequest) and /detokenize, with what this service does with it.
VLLM_TOKENIZE = {"model": "honoured", "prompt": "honoured", "messages": "honoured", "add_generation_prompt": "honoured",
                 "return_token_strs": "honoured", "continue_final_message": "honoured",
                 "add_special_tokens": "honoured", "chat_template": "refused unless allowed",
                 "chat_template_kwargs": "honoured", "media_io_kwargs": "refused unless empty",
                 "mm_processor_kwargs": "refused unless empty", "tools": "honoured"}


def test_every_vllm_field_is_honoured_or_refused(client: TestClient) -> None:
    """Each field changes the answer as vLLM's does, or is refused by name; none is silently ignored."""
    from app.api.schemas import DetokenizeRequest, TokenizeRequest

    assert set(TokenizeRequest.model_fields) == set(VLLM_TOKENIZE)
    assert set(DetokenizeRequest.model_fields) == {"model", "tokens"}
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    base = {"model": "llama-3.1-8b-instruct", "messages": msgs}
    plain = _tokenize(client, **base).json()
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    assert _tokenize(client, **base, tools=tools).json()["count"] > plain["count"]
    assert _tokenize(client, **base, add_generation_prompt=False).json()["count"] < plain["count"]
    assert _tokenize(client, **base, add_special_tokens=True).json()["count"] == plain["count"] + 1
    assert len(_tokenize(client, **base, return_token_strs=True).json()["token_strs"]) == plain["count"]
    assert "token_strs" not in plain
    prompt = _tokenize(client, model="llama-3.1-8b-instruct", prompt="Hi").json()["tokens"]
    assert prompt[0] == 128000 and _tokenize(client, model="llama-3.1-8b-instruct", prompt="Hi",
                                             add_special_tokens=False).json()["tokens"] == prompt[1:]
    for field, value in (("chat_template", "{{ messages }}"), ("media_io_kwargs", {"image": {}}),
                         ("mm_processor_kwargs", {"x": 1})):
        r = _tokenize(client, **base, **{field: value})
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field
    # model, prompt, messages, continue_final_message, chat_template_kwargs: the tests above
