"""``app.compat.tiktoken`` against the real tiktoken 0.14, method by method, on hostile inputs.

The reference side is a ``tiktoken.Encoding`` built from our own artifact files with tiktoken's own pattern and
special tokens (``harness/references.py``: no network). Every comparison covers the result or, when
tiktoken raises, the exception type and message.
"""

from __future__ import annotations

import itertools
import pickle
import random
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import tiktoken
import tiktoken.model

import app.compat.tiktoken as compat
from harness.references import reference_encoding
from tests.engine.exactness import corpus

#: tiktoken's encodings (all seven are in the store) and Llama 3, which the store adds.
NAMES = ["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony", "llama3"]
#: One encoding per pattern/vocabulary family, for the costlier comparisons.
FAMILIES = ["r50k_base", "p50k_edit", "cl100k_base", "o200k_harmony", "llama3"]


def outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """``("ok", result)`` or ``(exception type name, message)``: what a caller of ``call`` observes."""
    try:
        result = call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- the exception is the observation
        return type(exc).__name__, str(exc)
    if isinstance(result, np.ndarray):
        return "ok", (str(result.dtype), result.tolist())
    return "ok", result


def pair(name: str) -> tuple[tiktoken.Encoding, compat.Encoding]:
    return reference_encoding(name), compat.get_encoding(name)


def texts(seed: int, count: int) -> list[str]:
    """A seeded sample of the hostile corpus: random mixes, fragment pairs, code, special-token strings."""
    rng = random.Random(seed)
    pairs = list(itertools.islice(corpus.pairs(), 0, None, 97))
    out = list(corpus.random_mixes(seed=seed, count=count)) + rng.sample(pairs, min(count, len(pairs)))
    out += corpus.CODE + corpus.SPECIALS + corpus.WHITESPACE + ["", " ", "hello world", "请考试我的软件！12345"]
    return out


def with_specials(enc: compat.Encoding, seed: int, count: int) -> Iterator[str]:
    """Texts with special-token strings (and near misses) spliced in at random places."""
    rng = random.Random(seed)
    names = sorted(enc.special_tokens_set)[:40] + ["<|", "|>", "<|endoftext", "endoftext|>"]
    base = texts(seed, count)
    for _ in range(count):
        text = rng.choice(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(names) + text[at:]
        yield text


# ---------------------------------------------------------------------- registry and models


def test_list_and_get_encoding() -> None:
    names = compat.list_encoding_names()
    assert names[:7] == list(compat.TIKTOKEN_ENCODINGS)  # every tiktoken encoding, in tiktoken's order
    assert "llama3" in names
    for name in names:
        enc = compat.get_encoding(name)
        assert enc.name == name and compat.get_encoding(name) is enc and repr(enc) == f"<Encoding {name!r}>"
    for bad in ("nope", "GPT2", ""):
        kind, message = outcome(compat.get_encoding, bad)
        assert kind == "ValueError" and message.startswith(f"Unknown encoding {bad}.")
    assert outcome(compat.get_encoding, 5) == outcome(tiktoken.get_encoding, 5)


def test_model_tables_and_prefix_rules() -> None:
    assert compat.MODEL_TO_ENCODING == tiktoken.model.MODEL_TO_ENCODING
    assert compat.MODEL_PREFIX_TO_ENCODING == tiktoken.model.MODEL_PREFIX_TO_ENCODING
    assert list(compat.MODEL_PREFIX_TO_ENCODING) == list(tiktoken.model.MODEL_PREFIX_TO_ENCODING)  # order matters
    models = [*tiktoken.model.MODEL_TO_ENCODING, *(p + "x-2025" for p in tiktoken.model.MODEL_PREFIX_TO_ENCODING)]
    models += ["gpt-4o-2024-05-13", "gpt-4-32k", "gpt-3.5-turbo-FAKE", "ft:gpt-4o-mini:org::id", "gpt-5-nano",
               "gpt-oss-120b", "o1-preview", "gpt-4.1-nano", "unknown-model", "", "GPT-4", "gpt"]  # fmt: skip
    for model in models:
        assert outcome(compat.encoding_name_for_model, model) == outcome(
            tiktoken.model.encoding_name_for_model, model
        ), model
        if model in tiktoken.model.MODEL_TO_ENCODING or outcome(compat.encoding_name_for_model, model)[0] == "ok":
            assert compat.encoding_for_model(model).name == tiktoken.model.encoding_name_for_model(model)
    assert outcome(compat.encoding_for_model, "nope")[0] == "KeyError"


# ---------------------------------------------------------------------- attributes


@pytest.mark.parametrize("name", NAMES)
def test_attributes(name: str) -> None:
    ref, ours = pair(name)
    assert ours.n_vocab == ref.n_vocab and ours.max_token_value == ref.max_token_value
    assert ours.special_tokens_set == ref.special_tokens_set
    assert ours._special_tokens == ref._special_tokens and ours._pat_str == ref._pat_str
    assert ours._mergeable_ranks == ref._mergeable_ranks
    assert outcome(lambda e: e.eot_token, ours) == outcome(lambda e: e.eot_token, ref)
    assert ours.token_byte_values() == ref.token_byte_values()
    for token in [0, 1, 255, 50256, 50281, 100257, 100276, 199999, 200018, 128000, 128255, ref.n_vocab - 1]:
        assert ours.is_special_token(token) == ref.is_special_token(token)


@pytest.mark.parametrize("name", NAMES)
def test_single_tokens_both_ways(name: str) -> None:
    """decode_single_token_bytes / encode_single_token over the vocabulary (every id for the small ones)."""
    ref, ours = pair(name)
    step = 1 if ref.n_vocab < 60_000 else 7
    for token in range(0, ref.n_vocab + 3, step):
        got = outcome(ours.decode_single_token_bytes, token)
        assert got == outcome(ref.decode_single_token_bytes, token), token
        if got[0] == "ok":
            assert ours.encode_single_token(got[1]) == token
    for special in ref.special_tokens_set:
        assert ours.encode_single_token(special) == ref.encode_single_token(special)
    for bad in ["hello world foo", b"\xff\xfe\xfd", "", b"", "<|nope|>", "\ud800", 5, bytearray(b"a")]:
        assert outcome(ours.encode_single_token, bad)[0] == outcome(ref.encode_single_token, bad)[0], bad
    for bad_id in [-1, 2**32, 2**40, "3", 1.0, None, True]:
        assert outcome(ours.decode_single_token_bytes, bad_id) == outcome(ref.decode_single_token_bytes, bad_id)


# ---------------------------------------------------------------------- encoding


@pytest.mark.parametrize("name", NAMES)
def test_encode_variants_on_hostile_corpus(name: str) -> None:
    """encode_ordinary, encode (default, disallowed=(), allowed="all"), encode_to_numpy, decode round trip."""
    ref, ours = pair(name)
    sample = texts(seed=zlib.crc32(name.encode()) % 1000, count=300) + list(corpus.surrogate_strings())
    for text in sample:
        assert outcome(ours.encode_ordinary, text) == outcome(ref.encode_ordinary, text), text
        assert outcome(ours.encode, text) == outcome(ref.encode, text), text
        assert outcome(ours.encode, text, disallowed_special=()) == outcome(ref.encode, text, disallowed_special=())
        everything = outcome(ours.encode, text, allowed_special="all")
        assert everything == outcome(ref.encode, text, allowed_special="all"), text
        assert outcome(ours.encode_to_numpy, text, allowed_special="all") == outcome(
            ref.encode_to_numpy, text, allowed_special="all"
        )
        ids = everything[1]
        assert ours.decode(ids) == ref.decode(ids) and ours.decode_bytes(ids) == ref.decode_bytes(ids)


@pytest.mark.parametrize("name", NAMES)
def test_allowed_and_disallowed_specials(name: str) -> None:
    """Special-token strings in text: every combination of allowed/disallowed sets tiktoken's tests use and more."""
    ref, ours = pair(name)
    specials = sorted(ref.special_tokens_set)
    rng = random.Random(17)
    count = 150 if len(specials) < 20 else 20  # harmony and llama3: hundreds of specials make tiktoken's side slow
    for text in with_specials(ours, seed=len(name), count=count):
        some = set(rng.sample(specials, min(len(specials), rng.randint(1, 3))))
        argsets: list[dict[str, Any]] = [
            {},
            {"disallowed_special": ()},
            {"allowed_special": "all"},
            {"allowed_special": "all", "disallowed_special": "all"},
            {"allowed_special": some},
            {"allowed_special": frozenset(some), "disallowed_special": ()},
            {"allowed_special": some, "disallowed_special": set(specials) - some},
            {"disallowed_special": some},
            {"disallowed_special": ["<|", "nope"]},
            {"allowed_special": {"<|not a special|>", *some}},
            {"allowed_special": sorted(some)},  # a list: tiktoken's TypeError
            {"allowed_special": sorted(some), "disallowed_special": ()},
        ]
        for kwargs in argsets:
            want = outcome(ref.encode, text, **kwargs)
            assert outcome(ours.encode, text, **kwargs) == want, (text, kwargs)
            assert outcome(ours.encode_to_numpy, text, **kwargs) == outcome(ref.encode_to_numpy, text, **kwargs)
            assert outcome(ours.encode_batch, [text, "x"], **kwargs) == outcome(ref.encode_batch, [text, "x"], **kwargs)


@pytest.mark.parametrize("name", FAMILIES)
def test_batches(name: str) -> None:
    ref, ours = pair(name)
    batch = texts(seed=5, count=200) + ["a\ud800b", "<|endoftext|>"]
    assert ours.encode_ordinary_batch(batch) == ref.encode_ordinary_batch(batch)
    assert ours.encode_ordinary_batch(batch, num_threads=2) == ref.encode_ordinary_batch(batch, num_threads=2)
    for kwargs in ({}, {"allowed_special": "all"}, {"disallowed_special": ()}):
        assert outcome(ours.encode_batch, batch, **kwargs) == outcome(ref.encode_batch, batch, **kwargs)
    ids = ref.encode_batch(batch, allowed_special="all")
    assert ours.decode_batch(ids) == ref.decode_batch(ids)
    assert ours.decode_batch(ids, errors="ignore") == ref.decode_batch(ids, errors="ignore")
    assert ours.decode_bytes_batch(ids) == ref.decode_bytes_batch(ids)
    for bad in (["a", 3], [b"x"], [None]):
        assert outcome(ours.encode_ordinary_batch, bad)[0] == outcome(ref.encode_ordinary_batch, bad)[0]
        assert outcome(ours.encode_batch, bad)[0] == outcome(ref.encode_batch, bad)[0]


@pytest.mark.parametrize("name", NAMES)
def test_bad_text_arguments(name: str) -> None:
    ref, ours = pair(name)
    for bad in (b"hello", None, 5, ["a"]):
        for method in ("encode", "encode_ordinary", "encode_to_numpy", "encode_with_unstable"):
            assert outcome(getattr(ours, method), bad)[0] == outcome(getattr(ref, method), bad)[0], (method, bad)


# ---------------------------------------------------------------------- unstable tokens


def unstable(enc: Any, text: str, **kwargs: Any) -> tuple[str, Any]:
    """encode_with_unstable with the completions as a set (tiktoken's order is arbitrary)."""
    kind, value = outcome(enc.encode_with_unstable, text, **kwargs)
    if kind != "ok":
        return kind, value
    stable, completions = value
    return kind, (stable, sorted(map(tuple, completions)))


UNSTABLE_TEXTS = [
    "hello fanta", "hello", "hello ", "hello  ", "x\n", "x\n ", "today\n \n", "a  !", "  ", "\n\n", "\t", "naïve caf",
    "日本", "日本語の", "👍", "ab'", "don'", "It's", "1234", "12", "x = [1, 2", "def f(x):\n   ", "<|endoftext|>",
    "a<|endoftext|>", "a<|endoftext|> ", "", " ", "Привет, ми", "\u00a0", "x\u3000", "\r\n", "}\n\n",
]  # fmt: skip


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base", "llama3"])
def test_encode_with_unstable(name: str) -> None:
    ref, ours = pair(name)
    rng = random.Random(3)
    extra = 20 if ref.n_vocab < 110_000 else 5  # each completion search re-encodes ~n_vocab/4 candidates
    sample = UNSTABLE_TEXTS + [t[: rng.randint(1, 10)] for t in rng.sample(texts(seed=9, count=60), extra)]
    for text in sample:
        variants = ({}, {"allowed_special": "all"}, {"disallowed_special": ()}) if "<|" in text else ({},)
        for kwargs in variants:
            assert unstable(ours, text, **kwargs) == unstable(ref, text, **kwargs), (text, kwargs)
    assert unstable(ours, "\ud800x") == unstable(ref, "\ud800x")  # both raise UnicodeEncodeError


# ---------------------------------------------------------------------- bytes input and private helpers


@pytest.mark.parametrize("name", FAMILIES)
def test_encode_bytes(name: str) -> None:
    """``_encode_bytes`` (tiktoken's bytes entry point): truncated UTF-8, random bytes, the suite's own cases."""
    ref, ours = pair(name)
    rng = random.Random(11)
    samples = [b" \xec\x8b\xa4\xed", b"", b"\xff", *(b"\x80" * i for i in range(10)), b"hello \xff\xfe  \x80"]
    samples += [b"  \n\n \xe6\x97", b"caf\xc3", b"\xe2\x80\xa8\xe2"]
    for text in texts(seed=13, count=120):
        raw = text.encode("utf-8", "surrogatepass")
        samples += [raw, raw[: rng.randint(0, len(raw))]]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(150)]
    for raw in samples:
        got = outcome(ours._encode_bytes, raw)
        assert got == outcome(ref._encode_bytes, raw), raw
        assert ours.decode_bytes(got[1]) == raw
    assert outcome(ours._encode_bytes, "x") == outcome(ref._encode_bytes, "x")


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
def test_single_piece_and_python_split(name: str) -> None:
    ref, ours = pair(name)
    for text in texts(seed=21, count=100):
        if not text or any("\ud800" <= c <= "\udfff" for c in text):
            continue  # tiktoken's extension panics on an empty piece; surrogates cannot be encoded to bytes
        assert ours._encode_single_piece(text) == ref._encode_single_piece(text)
        assert ours._encode_single_piece(text.encode()) == ref._encode_single_piece(text.encode())
        assert ours._encode_only_native_bpe(text) == ref._encode_only_native_bpe(text)


# ---------------------------------------------------------------------- decoding


@pytest.mark.parametrize("name", NAMES)
def test_decode_errors(name: str) -> None:
    ref, ours = pair(name)
    unassigned = [i for i in (50256, 50257, 50281, 100256, 100261, 199998, 200000, 128000) if i < ref.n_vocab]
    unassigned = [i for i in unassigned if outcome(ref.decode_single_token_bytes, i)[0] != "ok"]
    cases: list[Any] = [[], [0], [-1], [2**32], [ref.n_vocab], [ref.n_vocab + 5], ["a"], [1.0], [True, 2], [None]]
    cases += [(1, 2), 5, "ab", b"ab", None, [[1]], *([i] for i in unassigned), [1, 2, ref.n_vocab]]
    for tokens in cases:
        for method in ("decode_bytes", "decode", "decode_tokens_bytes", "decode_with_offsets"):
            got, want = outcome(getattr(ours, method), tokens), outcome(getattr(ref, method), tokens)
            assert got[0] == want[0], (method, tokens, got, want)
            if method != "decode_tokens_bytes" or got[0] in ("ok", "KeyError"):
                assert got == want, (method, tokens)
    for errors in ("strict", "ignore", "replace", "backslashreplace"):
        ids = ref.encode("👍 naïve")[1:]
        assert outcome(ours.decode, ids, errors=errors) == outcome(ref.decode, ids, errors=errors)


@pytest.mark.parametrize("name", FAMILIES)
def test_decode_with_offsets(name: str) -> None:
    ref, ours = pair(name)
    samples = ["hello world", "hello world<|endoftext|> green cow", "我非常渴望与人工智能一起工作", "நடிகர் சூர்யா"]
    samples.append(" Ġ除")
    samples += texts(seed=31, count=150)
    for text in samples:
        ids = ref.encode(text, allowed_special="all")
        assert outcome(ours.decode_with_offsets, ids) == outcome(ref.decode_with_offsets, ids), text
        for cut in (1, 2, 3):  # cut inside a character: tiktoken raises UnicodeDecodeError
            assert outcome(ours.decode_with_offsets, ids[:-cut]) == outcome(ref.decode_with_offsets, ids[:-cut])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_harmony"])
@hypothesis.given(data=st.data())
@hypothesis.settings(deadline=None, max_examples=60)
def test_hyp_text_with_specials(name: str, data: st.DataObject) -> None:
    ref, ours = pair(name)
    pieces = st.one_of(st.text(max_size=12), st.sampled_from(sorted(ref.special_tokens_set)[:20] + ["<|", "|>"]))
    text = "".join(data.draw(st.lists(pieces, max_size=6)))
    for kwargs in ({"allowed_special": "all"}, {}, {"disallowed_special": ()}):
        assert outcome(ours.encode, text, **kwargs) == outcome(ref.encode, text, **kwargs)
    ids = data.draw(st.lists(st.integers(0, ref.n_vocab + 2), max_size=12))
    for method in ("decode_bytes", "decode", "decode_with_offsets"):
        assert outcome(getattr(ours, method), ids) == outcome(getattr(ref, method), ids)


# ---------------------------------------------------------------------- construction and pickling


def test_constructor_and_pickle() -> None:
    """tiktoken's test_pickle, plus the constructor's ``explicit_n_vocab`` checks and bad patterns."""
    base = compat.get_encoding("r50k_base")
    restored = pickle.loads(pickle.dumps(base))
    assert restored is not base and restored.name == "r50k_base" and restored._core is base._core
    assert len(pickle.dumps(base)) < 200  # registered encodings travel by name
    custom = compat.Encoding(
        name="custom_enc",
        pat_str=base._pat_str,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={"<|pickle|>": 100_000},
    )
    ref = tiktoken.Encoding(
        name="custom_enc",
        pat_str=base._pat_str,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={"<|pickle|>": 100_000},
    )
    again = pickle.loads(pickle.dumps(custom))
    for text in ("hello world", "<|pickle|> x", "a<|endoftext|>b"):
        for kwargs in ({"allowed_special": "all"}, {"disallowed_special": ()}, {}):
            want = outcome(ref.encode, text, **kwargs)
            assert outcome(custom.encode, text, **kwargs) == want == outcome(again.encode, text, **kwargs)
    assert custom.n_vocab == ref.n_vocab == 100_001 and custom.decode([100_000]) == "<|pickle|>"
    assert outcome(lambda: custom.eot_token) == outcome(lambda: ref.eot_token)
    kwargs: dict[str, Any] = {"pat_str": base._pat_str, "mergeable_ranks": base._mergeable_ranks}
    good = {"<|endoftext|>": 50256}
    assert compat.Encoding("ok", special_tokens=good, explicit_n_vocab=50257, **kwargs).n_vocab == 50257
    for n in (50256, 50258):
        assert outcome(compat.Encoding, "x", special_tokens=good, explicit_n_vocab=n, **kwargs)[0] == "AssertionError"
        assert outcome(tiktoken.Encoding, "x", special_tokens=good, explicit_n_vocab=n, **kwargs)[0] == "AssertionError"
    bad_pattern = outcome(compat.Encoding, "x", pat_str="(", mergeable_ranks=base._mergeable_ranks, special_tokens={})
    assert bad_pattern[0] == "ValueError"


def test_public_surface_covers_tiktoken() -> None:
    """Every public name of tiktoken 0.14 (module and ``Encoding``) exists here, plus the private helpers its own
    tests call."""
    for name in ("Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model", "list_encoding_names"):
        assert hasattr(compat, name)
    public = {n for n in dir(tiktoken.Encoding) if not n.startswith("_")}
    assert public <= set(dir(compat.Encoding)), public - set(dir(compat.Encoding))
    private = {"_encode_bytes", "_encode_single_piece", "_encode_only_native_bpe", "_special_tokens",
               "_mergeable_ranks", "_pat_str"}
    assert all(hasattr(compat.get_encoding("cl100k_base"), n) for n in private)
    assert compat.__version__ == tiktoken.__version__
