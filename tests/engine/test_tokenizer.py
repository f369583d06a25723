"""The Tokenizer contract, the loader table and the rules every family keeps (template, prefix/suffix, parts)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from app.engine import (
    LOADERS,
    ArtifactError,
    Special,
    Store,
    Tokenizer,
    UnknownSpecialTokenError,
    get_tokenizer,
    load_all,
    load_encoding,
)
from app.engine.char_bpe import CharBPEEncoding
from app.engine.store import FORMATS, write_manifest


def test_every_format_has_exactly_one_loader() -> None:
    assert set(LOADERS) == set(FORMATS)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"])
def test_bundled_tokenizers_implement_the_protocol(name: str) -> None:
    tokenizer = get_tokenizer(name)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.added_tokens == {}


def test_llama3_template_adds_begin_of_text_outside_the_named_specials() -> None:
    tokenizer = get_tokenizer("llama3")
    text = tokenizer.encode("Hello")
    assert tokenizer.template.describe() == "<|begin_of_text|> $text"
    assert tokenizer.encode("Hello", add_special_tokens=True) == [128000, *text]
    assert tokenizer.encode("Hello", add_special_tokens=True, suffix=["<|eot_id|>"]) == [128000, *text, 128009]
    assert tokenizer.count("Hello", add_special_tokens=True, prefix=["<|eot_id|>"]) == 2 + len(text)
    parts = tokenizer.encode_parts([Special("<|start_header_id|>"), "user"], add_special_tokens=True)
    assert parts == [128000, 128006, *tokenizer.encode("user")]


def test_default_is_no_template_and_text_stays_text() -> None:
    tokenizer = get_tokenizer("llama3")
    assert tokenizer.encode("<|begin_of_text|>") == tokenizer.encode("<|begin_of_text|>", add_special_tokens=False)
    assert 128000 not in tokenizer.encode("<|begin_of_text|>")
    cl = get_tokenizer("cl100k_base")
    assert cl.template.describe() == "$text"
    assert cl.encode("hi", add_special_tokens=True) == cl.encode("hi")


def test_unknown_prefix_name_raises_before_encoding() -> None:
    with pytest.raises(UnknownSpecialTokenError, match="<|nope|>"):
        get_tokenizer("cl100k_base").count("hi", prefix=["<|nope|>"])


def test_load_all_loads_only_the_names_asked_for() -> None:
    loaded = load_all(names=["r50k_base", "llama3"])
    assert list(loaded) == ["gpt2", "llama3"]


def test_compressed_artifact_is_verified_against_the_published_bytes(store_copy: Path) -> None:
    store = Store.load(store_copy)
    spec = store.spec("gpt2")
    published = spec.artifact_path.read_bytes()
    packed = store_copy / "gpt2.tiktoken.xz"
    packed.write_bytes(lzma.compress(published, format=lzma.FORMAT_XZ))
    spec.artifact_path.unlink()
    specs = [s if s.name != "gpt2" else type(s)(**{**s.__dict__, "artifact_path": packed, "compression": "xz"})
             for s in store]
    write_manifest(store_copy, specs)
    reloaded = Store.load(store_copy).spec("gpt2")
    assert reloaded.compression == "xz"
    assert load_encoding(reloaded).encode("hello world") == get_tokenizer("gpt2").encode("hello world")
    packed.write_bytes(lzma.compress(published + b"x", format=lzma.FORMAT_XZ))
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        load_encoding(reloaded)
    packed.write_bytes(published[:1000])
    with pytest.raises(ArtifactError, match="not a valid xz file"):
        load_encoding(reloaded)


def test_char_bpe_is_served_from_the_engine_not_from_training() -> None:
    assert CharBPEEncoding.__module__ == "app.engine.char_bpe"
    from app.engine.training import char_bpe as training_char_bpe

    assert training_char_bpe.CharBPEEncoding is CharBPEEncoding


# ------------------------------------------------------------------------------------- count_framed


def _framed_reference(tokenizer: Tokenizer, text: str, names: list[str]) -> int:
    """The parts a regex split on ``names`` (in order) gives, encoded: what ``count_framed`` must count."""
    import re

    pieces = re.split("(" + "|".join(map(re.escape, names)) + ")", text)
    parts = [Special(p) if i % 2 else p for i, p in enumerate(pieces) if p or i % 2]
    return len(tokenizer.encode_parts(parts))


def _hostile_texts(names: list[str], seed: int, n: int) -> list[str]:
    import random

    rng = random.Random(seed)
    halves = [x for name in names for x in (name[: len(name) // 2], name[len(name) // 2:], name[1:], name[:-1])]
    alphabet = [*names, *halves, " ", "  ", "\n", "\n\n", "\t", "a", "user", "assistant", "'s", "123", "é", "e\u0301",
                "日本", "😀", "<", "|", ">", "<|", "|>", "\ue000", "\ud800", "x" * 50]
    out = ["", *names, "".join(names), " ".join(names)]
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    return out


def test_count_framed_counts_the_parts_the_split_gives() -> None:
    """Native (one call into the core) and general paths against encoding the split parts: names that share
    prefixes or sit inside one another (the first listed wins), names with different first bytes and non-ASCII
    ones, halves of names, lone surrogates; on a byte-level RankBPETokenizer (native and python backends) and a
    pipeline."""
    from app.engine.encoding import RankBPETokenizer

    base = get_tokenizer("cl100k_base")
    assert isinstance(base, RankBPETokenizer)
    specials = {"<|a|>": 200000, "<|a|>x": 200001, "[SEP]": 200002, "é»": 200003, "日本語": 200004, "\n\n": 200005,
                "ab": 200006, "<|endoftext|>": 200007}
    tokenizers = [RankBPETokenizer("framed-" + backend, pattern=base.pattern, mergeable_ranks=base._ranks,
                          special_tokens=specials, backend=backend) for backend in ("native", "python")]
    assert tokenizers[0]._native is not None and tokenizers[0]._native.count_framed is not None
    orders = [list(specials), sorted(specials, key=len, reverse=True), sorted(specials, key=len),
              ["<|a|>", "<|endoftext|>"], ["[SEP]", "é»"]]
    compared = 0
    for order in orders:
        for text in _hostile_texts(list(specials), seed=len(order), n=400):
            want = _framed_reference(tokenizers[1], text, order)
            for tokenizer in tokenizers:
                assert tokenizer.count_framed(text, order) == want, (tokenizer.backend, text, order)
                assert Tokenizer.count_framed(tokenizer, text, order) == want
            compared += 1
    assert compared > 2000
    with pytest.raises(UnknownSpecialTokenError):
        tokenizers[0].count_framed("x", ["<|nope|>"])


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gemma3"])
def test_count_framed_on_chat_tokenizers(name: str) -> None:
    tokenizer = get_tokenizer(name)
    names = sorted(tokenizer.special_tokens, key=len, reverse=True)[:12]
    for text in _hostile_texts(names + ["<think>", "<tool_call>"], seed=5, n=150):
        assert tokenizer.count_framed(text, names) == _framed_reference(tokenizer, text, names), text


# ------------------------------------------------------------------------------------- encode(text), the plain call

PLAIN_CALL_TEXTS = ["", "hello", " Hello  world\n", "日本語のテキスト", "<s> [INST] <|endoftext|>", "a\ud800b",
                    "x" * 3000, "cafe\u0301 <think>", "e\u0301\ud800<", "Å ﬀ <tool_call>"]


@pytest.mark.parametrize("name", ["cl100k_base", "mistral-v3", "xlm-roberta-sentencepiece", "xlm-roberta",
                                  "bge-small-en-v1.5", "qwen3", "mistral-nemo", "llama2"])
@pytest.mark.parametrize("backend", ["native", "python"])
def test_plain_encode_call_is_the_method(name: str, backend: str) -> None:
    """``encode(text)`` on a compiled backend is one compiled dispatch (``_bind_plain_encode``); it gives what the
    method gives for every text, and every other call shape is the method itself. The pure-Python backend keeps
    the method."""
    from app.engine import native

    tok = get_tokenizer(name, backend=backend)
    method = type(tok).encode.__get__(tok)
    dispatched = type(tok.encode).__name__ == "FastCall"
    assert dispatched == (backend == "native" and native.available() and tok.backend == "native")
    straight = tok.valid_text_calls() is not None  # the plain calls go to the compiled core itself
    assert (type(tok.count).__name__ == "FastCall") == (dispatched and (type(tok).count is Tokenizer.count
                                                                        or straight))
    for text in PLAIN_CALL_TEXTS:
        ids = method(text)
        assert tok.encode(text) == ids
        assert tok.encode(text=text) == ids
        assert tok.count(text) == len(ids) == tok.count(text=text) == tok.count(text, prefix=())
        assert tok.encode(text, add_special_tokens=False, prefix=(), suffix=()) == ids
    specials = list(tok.special_tokens)
    if specials:
        assert tok.encode("hi", prefix=[specials[0]]) == [tok.special_tokens[specials[0]], *tok.encode("hi")]
    raised = []
    for call in (tok.encode, method):
        with pytest.raises(Exception) as info:  # noqa: PT011 -- the same exception either way is the point
            call(b"bytes")
        raised.append(type(info.value))
    assert raised[0] is raised[1]


# ------------------------------------------------------------------------------------- the one contract


def test_tokenizer_is_an_abstract_base_every_family_subclasses() -> None:
    """One contract: ``Tokenizer`` cannot be instantiated, and every tokenizer class of the engine subclasses it and
    implements its abstract methods (so no caller needs to ask for a concrete class or probe for a method)."""
    from app.engine.encoding import RankBPETokenizer
    from app.engine.pipeline.pipeline import Pipeline

    with pytest.raises(TypeError, match="abstract"):
        Tokenizer()  # type: ignore[abstract]
    for cls in (RankBPETokenizer, CharBPEEncoding, Pipeline):
        assert issubclass(cls, Tokenizer) and not cls.__abstractmethods__, cls
    kinds = {type(get_tokenizer(n)) for n in ("cl100k_base", "qwen3", "xlm-roberta", "bge-small-en-v1.5")}
    # qwen3 is a Pipeline on either backend (its compiled byte-level path is a model of the pipeline)
    assert kinds == {RankBPETokenizer, Pipeline}
    tokenizer_classes = {c.__name__ for c in _subclasses(Tokenizer)}
    assert tokenizer_classes == {"RankBPETokenizer", "CharBPEEncoding", "Pipeline"}, tokenizer_classes


def _subclasses(cls: type) -> set[type]:
    """Every (transitive) subclass of ``cls`` defined in ``app`` once the engine's families are imported."""
    import app.engine.char_bpe
    import app.engine.pipeline.hf_json
    import app.engine.tekken  # noqa: F401

    out: set[type] = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("app."):
            out |= {sub, *_subclasses(sub)}
    return out


@pytest.mark.parametrize("name", ["cl100k_base", "qwen3", "xlm-roberta", "bge-small-en-v1.5"])
def test_buffer_methods_and_framed_count_are_the_contract(name: str) -> None:
    """Every family counts and encodes a batch in Arrow's string layout (native or decoded) and counts framed text,
    with the same results as its plain methods."""
    import array

    tok = get_tokenizer(name)
    texts = ["Hello, wörld", "", "日本語 text", "x" * 40]
    blob = b"".join(t.encode() for t in texts)
    bounds = [0]
    for t in texts:
        bounds.append(bounds[-1] + len(t.encode()))
    for wide, code in ((True, "q"), (False, "i")):
        offsets = array.array(code, bounds)
        assert tok.count_utf8_buffers(blob, offsets, wide=wide) == tok.count_batch(texts)
        ids, starts = tok.encode_utf8_buffers(blob, offsets, wide=wide)
        flat, cuts = array.array("I", ids).tolist(), array.array("i", starts).tolist()
        assert [flat[a:b] for a, b in zip(cuts, cuts[1:], strict=False)] == tok.encode_batch(texts)
    special = next(iter(tok.special_tokens))
    assert tok.count_framed(f"a{special}b", [special]) == len(tok.encode("a")) + 1 + len(tok.encode("b"))


def test_unknown_id_is_declared_by_every_family() -> None:
    assert get_tokenizer("cl100k_base").unk_id is None
    bert = get_tokenizer("bge-small-en-v1.5")
    assert bert.unk_id == bert.special_token_id("[UNK]")
    xlmr = get_tokenizer("xlm-roberta")  # its <unk> is a model piece, not a special token
    assert xlmr.unk_id == 3 and xlmr.encode("\U0001F9EA")[-1] == 3
