"""The RankBPETokenizer API: special tokens only by name, decoding, offsets, batches, errors."""

from __future__ import annotations

import pytest

from app.engine import InvalidTokenIdError, Special, UnknownSpecialTokenError, get_tokenizer

ALL = ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"]


@pytest.mark.parametrize("name", ALL)
def test_special_token_strings_in_text_are_plain_text(name: str) -> None:
    tokenizer = get_tokenizer(name)
    special_ids = set(tokenizer.special_tokens.values())
    for special in list(tokenizer.special_tokens)[:40]:
        for text in (special, f"X.{special}", f"a{special}b", f" {special}\n", special * 3):
            ids = tokenizer.encode(text)
            assert not special_ids.intersection(ids), (name, text)
            assert tokenizer.decode(ids) == text
            assert tokenizer.count(text) == len(ids)


def test_prefix_suffix_and_parts_place_special_ids() -> None:
    tokenizer = get_tokenizer("llama3")
    body = tokenizer.encode("Hello")
    assert tokenizer.encode("Hello", prefix=["<|begin_of_text|>"], suffix=["<|eot_id|>"]) == [128000, *body, 128009]
    assert tokenizer.count("Hello", prefix=["<|begin_of_text|>"], suffix=["<|eot_id|>"]) == len(body) + 2
    parts = [Special("<|start_header_id|>"), "user", Special("<|end_header_id|>"), "\n\nHi", Special("<|eot_id|>")]
    want = [128006, *tokenizer.encode("user"), 128007, *tokenizer.encode("\n\nHi"), 128009]
    assert tokenizer.encode_parts(parts) == want
    with pytest.raises(TypeError):
        tokenizer.encode_parts([42])  # type: ignore[list-item]


def test_unknown_special_name_lists_the_allowed_ones() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    with pytest.raises(UnknownSpecialTokenError) as info:
        tokenizer.encode("x", suffix=["<|eot_id|>"])
    message = str(info.value)
    assert "<|eot_id|>" in message and "<|endoftext|>" in message and "<|fim_prefix|>" in message
    with pytest.raises(UnknownSpecialTokenError):
        tokenizer.encode_parts([Special("<|im_end|>")])


def test_decode_renders_and_skips_special_tokens() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    ids = tokenizer.encode("hi", suffix=["<|endoftext|>"])
    assert tokenizer.decode(ids) == "hi<|endoftext|>"
    assert tokenizer.decode(ids, skip_special=True) == "hi"
    assert tokenizer.is_special(100257) and not tokenizer.is_special(ids[0])
    # tiktoken's table maps 200018 to both names; decode uses the first, as tiktoken does.
    harmony = get_tokenizer("o200k_harmony")
    assert harmony.special_token_id("<|endofprompt|>") == 200018
    assert harmony.special_token_id("<|reserved_200018|>") == 200018
    assert harmony.decode([200018]) == "<|endofprompt|>"


@pytest.mark.parametrize("bad", [-1, 100256, 100261, 100277, 10**12])
def test_decode_of_an_unassigned_id_names_it(bad: int) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    with pytest.raises(InvalidTokenIdError) as info:
        tokenizer.decode([15339, bad])
    assert info.value.token_id == bad and info.value.index == 1
    assert str(bad) in str(info.value)


def test_decode_partial_utf8_becomes_replacement_character() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    ids = tokenizer.encode("😀")
    assert len(ids) > 1
    assert "\ufffd" in tokenizer.decode(ids[:1])
    assert tokenizer.decode_bytes(ids) == "😀".encode()
    assert b"".join(tokenizer.decode_tokens_bytes(ids)) == "😀".encode()
    assert [tokenizer.token_bytes(i) for i in ids] == tokenizer.decode_tokens_bytes(ids)


def test_lone_surrogates_follow_tiktoken_replacement_rule() -> None:
    tokenizer = get_tokenizer("cl100k_base")
    assert tokenizer.encode("a\ud800b") == tokenizer.encode("a\ufffdb")
    assert tokenizer.encode("\ud83d\ude00") == tokenizer.encode("😀")  # a surrogate pair joins, as in tiktoken


@pytest.mark.parametrize("text", ["hello world", "Grüße, 世界! 👨‍👩‍👧 ok", "  a  b\n\n ", "", "x" * 300])
def test_offsets_cover_the_text(text: str) -> None:
    tokenizer = get_tokenizer("o200k_base")
    ids, spans = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    assert len(spans) == len(ids)
    if text:
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:], strict=False):
        assert s1 <= s2 and e1 <= e2 and s2 <= e1  # monotone, no gaps (overlap only inside split characters)
    for token_id, (start, end) in zip(ids, spans, strict=True):
        raw = tokenizer.token_bytes(token_id)
        try:
            assert text[start:end] == raw.decode("utf-8")
        except UnicodeDecodeError:
            assert raw in text[start:end].encode()  # a partial character: the span covers the whole character


def test_batches_match_single_calls() -> None:
    tokenizer = get_tokenizer("gpt2")
    texts = ["a", "hello world", "", "日本語のテキスト", "x" * 1000]
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(t) for t in texts]
    assert tokenizer.encode_batch(texts, num_threads=2) == [tokenizer.encode(t) for t in texts]
    assert tokenizer.count_batch(texts, num_threads=2) == [tokenizer.count(t) for t in texts]
    assert tokenizer.decode_batch(tokenizer.encode_batch(texts)) == texts
