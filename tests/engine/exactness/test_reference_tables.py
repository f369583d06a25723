"""Our pattern strings and special-token tables equal the references'; special ids decode as tiktoken decodes."""

from __future__ import annotations

import pytest

from app.engine import get_store, patterns

from .reference import (
    META_LLAMA3_PATTERN,
    META_LLAMA3_SPECIALS,
    PATTERN_TOKENIZERS,
    TOKENIZERS,
    ours,
    reference_encoding,
    reference_ranks,
    reference_spec,
)


@pytest.mark.parametrize("pattern_id", sorted(PATTERN_TOKENIZERS))
def test_pattern_string_equals_reference(pattern_id: str) -> None:
    assert patterns.PATTERNS[pattern_id] == reference_spec(PATTERN_TOKENIZERS[pattern_id]).pat_str


def test_reference_patterns_are_distinct_and_known() -> None:
    assert reference_spec("gpt2").pat_str == reference_spec("r50k_base").pat_str == patterns.GPT2
    assert reference_spec("o200k_harmony").pat_str == reference_spec("o200k_base").pat_str == patterns.O200K
    assert patterns.LLAMA3 == META_LLAMA3_PATTERN
    assert len({patterns.GPT2, patterns.CL100K, patterns.O200K, patterns.LLAMA3}) == 4


def test_each_tokenizer_uses_the_reference_pattern(tokenizer: str, backend: str) -> None:
    assert ours(tokenizer, backend).pattern == reference_spec(tokenizer).pat_str


def test_special_tokens_equal_reference(tokenizer: str, backend: str) -> None:
    assert ours(tokenizer, backend).special_tokens == reference_spec(tokenizer).special_tokens


def test_llama3_special_tokens_are_metas_list() -> None:
    specials = ours("llama3").special_tokens
    assert specials == META_LLAMA3_SPECIALS
    assert len(specials) == 256
    assert specials["<|begin_of_text|>"] == 128000
    assert specials["<|eot_id|>"] == 128009
    assert specials["<|python_tag|>"] == 128010
    assert specials["<|reserved_special_token_2|>"] == 128011
    assert specials["<|reserved_special_token_246|>"] == 128255


def test_o200k_harmony_shares_o200k_base_ranks() -> None:
    store = get_store()
    assert store.spec("o200k_harmony").sha256 == store.spec("o200k_base").sha256


def test_vocabulary_equals_reference(tokenizer: str, backend: str) -> None:
    """Every ordinary id decodes to the bytes tiktoken's parser gives it; sizes agree."""
    enc, ref = ours(tokenizer, backend), reference_encoding(tokenizer)
    spec = get_store().spec(tokenizer)
    ranks = reference_ranks(spec.artifact_path.name, spec.sha256)
    assert enc.n_vocab == ref.n_vocab
    assert enc.max_token_value == ref.max_token_value
    ids = sorted(ranks.values())
    assert enc.decode_tokens_bytes(ids) == ref.decode_tokens_bytes(ids)


def test_special_ids_decode_like_tiktoken(tokenizer: str, backend: str) -> None:
    """Every special id decodes to the same string as in tiktoken (e.g. o200k_harmony 200018)."""
    enc, ref = ours(tokenizer, backend), reference_encoding(tokenizer)
    ids = sorted(set(reference_spec(tokenizer).special_tokens.values()))
    differing = {i: (enc.decode([i]), ref.decode([i])) for i in ids if enc.decode([i]) != ref.decode([i])}
    assert not differing, f"special ids decoded differently (ours, tiktoken): {dict(list(differing.items())[:5])}"
    assert enc.decode_bytes(ids) == ref.decode_bytes(ids)
    assert all(enc.is_special(i) for i in ids)


def test_o200k_harmony_200018_decodes_like_tiktoken(backend: str) -> None:
    assert ours("o200k_harmony", backend).decode([200018]) == reference_encoding("o200k_harmony").decode([200018])


def test_special_strings_in_text_are_plain_text(tokenizer: str, backend: str) -> None:
    """A special token's string inside text encodes as tiktoken's encode_ordinary does: never a special id."""
    enc, ref = ours(tokenizer, backend), reference_encoding(tokenizer)
    specials = reference_spec(tokenizer).special_tokens
    special_ids = set(specials.values())
    for name in list(specials)[:40]:
        for text in (name, f"X.{name}", f"{name}{name}", f"a{name}b", f" {name}\n"):
            ids = enc.encode(text)
            assert ids == ref.encode_ordinary(text)
            assert not special_ids & set(ids)
            assert enc.decode(ids) == text


@pytest.mark.parametrize("name", TOKENIZERS)
def test_special_tokens_by_name_match_tiktoken_allowed_special(name: str, backend: str) -> None:
    """prefix/suffix by name give the ids tiktoken gives with allowed_special for that token."""
    tokenizer, ref = ours(name, backend), reference_encoding(name)
    for special in list(reference_spec(name).special_tokens)[:12]:
        text = "hello world"
        assert tokenizer.encode(text, prefix=[special]) == ref.encode(special + text, allowed_special={special})
        assert tokenizer.encode(text, suffix=[special]) == ref.encode(text + special, allowed_special={special})
