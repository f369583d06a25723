"""The byte-level fast path (:mod:`app.engine.pipeline.models.byte_level_rank`: a :class:`Pipeline` whose model is a
:class:`ByteLevelRankBPE`) against Hugging Face ``tokenizers`` (special-
token splitting off: ``encode_special_tokens = True``) and against our pure-Python pipeline, on the bundled Qwen3 and
DeepSeek-V3 files: hostile strings, real multilingual text, every added and special token alone and glued to words,
NFC-sensitive text, long runs; ids, counts, batches, offsets and decoding.

``FAST_HF_CASES`` random strings per tokenizer in the default run (a development run takes hundreds of thousands:
``FAST_HF_CASES=300000 pytest tests/engine/pipeline/test_byte_level_rank.py -k random``).
"""

from __future__ import annotations

import json
import os
import random
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest
from tokenizers import Tokenizer as HFTokenizer

from app.engine import get_store, get_tokenizer, native, patterns
from app.engine.encoding import scrub_surrogates
from app.engine.pipeline.added import AddedMatcher, AddedToken
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.pipeline.models.bpe import BPE
from app.engine.pipeline.models.byte_level_rank import (
    ByteLevelRankBPE,
    IsolatedSplits,
    LiteralMatcher,
    RankTextEncoder,
    byte_level_rank_bpe,
)
from app.engine.pipeline.pipeline import Pipeline
from harness import realtext

from ..exactness import corpus

pytestmark = pytest.mark.skipif(not native.available(), reason="compiled core not built")

NAMES = ["qwen3", "deepseek-v3"]
FUZZ_CASES = int(os.environ.get("FAST_HF_CASES", "3000"))
FUZZ_SEED = int(os.environ.get("FAST_HF_SEED", "20261201"))


@cache
def document(name: str) -> dict[str, object]:
    return json.loads(get_store().spec(name).read_artifact())  # type: ignore[no-any-return]


@cache
def hf(name: str) -> HFTokenizer:
    tok = HFTokenizer.from_str(json.dumps(document(name)))
    tok.encode_special_tokens = True
    return tok


def fast(tok: object) -> bool:
    """True when ``tok`` runs the byte-level fast path (a pipeline over a :class:`ByteLevelRankBPE`)."""
    return isinstance(tok, Pipeline) and isinstance(tok.model, ByteLevelRankBPE) and tok.text_path == "text-encoder"


def ours(name: str) -> Pipeline:
    tok = get_tokenizer(name)
    assert isinstance(tok, Pipeline) and fast(tok), tok
    return tok


def model(name: str) -> ByteLevelRankBPE:
    found = ours(name).model
    assert isinstance(found, ByteLevelRankBPE)
    return found


def hf_ids(name: str, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
    return [e.ids for e in hf(name).encode_batch(texts, add_special_tokens=add_special_tokens)]


def assert_same(name: str, texts: list[str]) -> None:
    """Ids, counts and batches equal Hugging Face's for every text (both ways of add_special_tokens)."""
    tok = ours(name)
    texts = [scrub_surrogates(t) for t in texts]
    want = hf_ids(name, texts)
    got = tok.encode_batch(texts)
    bad = [t for t, a, b in zip(texts, got, want, strict=True) if a != b]
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ, first {bad[0][:80]!r}"
    assert [tok.encode(t) for t in texts[:300]] == want[:300]
    assert tok.count_batch(texts) == [len(w) for w in want]
    with_specials = hf_ids(name, texts[:200], add_special_tokens=True)
    assert [tok.encode(t, add_special_tokens=True) for t in texts[:200]] == with_specials


def token_strings(name: str) -> list[str]:
    """Every added token (special or not) alone, glued to words, spaces and each other."""
    contents = [t["content"] for t in document(name)["added_tokens"]]  # type: ignore[index]
    rng = random.Random(3)
    out: list[str] = []
    for c in contents:
        out += [c, f"x{c}y", f" {c} ", f"{c}{c}", f"hello{c}\n", f"{c}'s", f"日本{c}語", f"{c[:-1]}", f"{c[1:]}"]
    for _ in range(300):
        out.append("".join(rng.choice([*rng.sample(contents, 3), " ", "a", "\n", "<", "|", "｜"])
                           for _ in range(rng.randint(1, 8))))
    return out


NFC_SENSITIVE = [
    "e\u0301", "cafe\u0301 ", "\u212b", "A\u030a", "\u1100\u1161\u11a8", "\uf900\uf901", "ﬁ ﬂ", "Ω \u2126",
    "\u0344", "a\u0328\u0301", "\u0958\u0959", "x\u0301\u0323y", "\u00c5\u0301", "\u1e9b\u0323", "ᄀ각",
    "e\u0301<think>", "<think>e\u0301</think>", "Å<tool_call>A\u030a", "\u2000\u2001",
]


@pytest.mark.parametrize("name", NAMES)
def test_bundled_file_loads_as_the_fast_path(name: str) -> None:
    tok = ours(name)
    assert tok.backend == "native" and tok.n_vocab == get_store().spec(name).vocab_size
    assert tok.special_tokens == get_tokenizer(name, backend="python").special_tokens
    assert tok.added_tokens == get_tokenizer(name, backend="python").added_tokens
    assert model(name).native is not None and isinstance(model(name).reference, BPE)
    assert tok.pattern == model(name).core.pattern != ""


def test_bundled_files_run_native_scanners() -> None:
    split = document("qwen3")["pre_tokenizer"]["pretokenizers"][0]  # type: ignore[index]
    assert split["pattern"]["Regex"] == patterns.QWEN2
    splits = document("deepseek-v3")["pre_tokenizer"]["pretokenizers"][:3]  # type: ignore[index]
    assert tuple(s["pattern"]["Regex"] for s in splits) == patterns.DEEPSEEK_V3_SPLITS
    assert model("qwen3").has_scanner
    assert model("deepseek-v3").has_scanner  # (its split sequence)


@pytest.mark.parametrize("name", NAMES)
def test_hostile_fragments(name: str) -> None:
    texts = [*corpus.ALL_FRAGMENTS, *corpus.glued_triples(), *corpus.exhaustive()]
    assert_same(name, texts[:: max(1, len(texts) // 20000)])


@pytest.mark.parametrize("name", NAMES)
def test_added_and_special_tokens_alone_and_glued(name: str) -> None:
    assert_same(name, token_strings(name))


@pytest.mark.parametrize("name", NAMES)
def test_first_characters_of_added_tokens_without_their_strings(name: str) -> None:
    """Text holding an added token's first character but none of the tokens' strings goes to the compiled call
    whole (``RankTextEncoder``'s ``avoid`` strings); ids as Hugging Face's, next to the same text with the strings."""
    contents = [t["content"] for t in document(name)["added_tokens"]]  # type: ignore[index]
    near = ["if a < b and c<d: return x<<2", "<html><body>é</body></html>", "vector<int> v; // <- here",
            *(c[:-1] + " " + c[1:] for c in contents), *(c.upper() if c.upper() != c else c + c[:1] for c in contents)]
    assert_same(name, [*near, *(t + contents[i % len(contents)] for i, t in enumerate(near))])


@pytest.mark.parametrize("name", NAMES)
def test_nfc_sensitive_text(name: str) -> None:
    assert_same(name, NFC_SENSITIVE + [s * 3 + " " + s for s in NFC_SENSITIVE])


@pytest.mark.parametrize("name", NAMES)
def test_random_mixes(name: str) -> None:
    texts = list(corpus.random_mixes(FUZZ_SEED + len(name), FUZZ_CASES))
    rng = random.Random(FUZZ_SEED)
    contents = [t["content"] for t in document(name)["added_tokens"]][:40]  # type: ignore[index]
    texts += [t[: len(t) // 2] + rng.choice(contents) + t[len(t) // 2 :] for t in texts[: FUZZ_CASES // 4]]
    texts += [t + rng.choice(NFC_SENSITIVE) for t in texts[: FUZZ_CASES // 4]]
    assert_same(name, texts)


@pytest.mark.parametrize("name", NAMES)
def test_long_runs(name: str) -> None:
    assert_same(name, list(corpus.long_runs(100_000).values()))


@pytest.mark.parametrize("name", NAMES)
def test_real_multilingual_text(name: str) -> None:
    docs = realtext.documents()
    texts = [s for d in docs for s in realtext.strings(d)[:12]]
    assert_same(name, texts)


@pytest.mark.parametrize("name", NAMES)
def test_surrogates_are_scrubbed(name: str) -> None:
    tok = ours(name)
    for text in corpus.surrogate_strings():
        assert tok.encode(text) == hf_ids(name, [scrub_surrogates(text)])[0]


@pytest.mark.parametrize("name", NAMES)
def test_same_as_the_pure_python_pipeline(name: str) -> None:
    reference = get_tokenizer(name, backend="python")
    assert isinstance(reference, Pipeline)
    texts = [*token_strings(name)[:200], *NFC_SENSITIVE, *list(corpus.random_mixes(FUZZ_SEED, 400))]
    texts = [scrub_surrogates(t) for t in texts]
    tok = ours(name)
    assert [tok.encode(t) for t in texts] == [reference.encode(t) for t in texts]
    sample = texts[::7]
    assert [tok.encode_with_offsets(t) for t in sample] == [reference.encode_with_offsets(t) for t in sample]


@pytest.mark.parametrize("name", NAMES)
def test_offsets_and_decoding_equal_hugging_face(name: str) -> None:
    """Offsets of text that NFC leaves alone (offsets through a changing NFC are the pipeline's, compared with it
    above); decoding of everything."""
    tok = ours(name)
    texts = [*token_strings(name)[::5], *NFC_SENSITIVE, *list(corpus.random_mixes(FUZZ_SEED + 1, 500)),
             *[s for d in realtext.documents()[:10] for s in realtext.strings(d)[1:10]]]
    texts = [scrub_surrogates(t) for t in texts]
    stable = 0
    for text, tokenizer in zip(texts, hf(name).encode_batch(texts, add_special_tokens=False), strict=True):
        ids, spans = tok.encode_with_offsets(text)
        assert ids == tokenizer.ids
        if unicodedata.is_normalized("NFC", text) or name == "deepseek-v3":  # DeepSeek-V3 does not normalize
            stable += 1
            assert spans == [tuple(o) for o in tokenizer.offsets], repr(text[:60])
        assert tok.decode(ids) == hf(name).decode(tokenizer.ids, skip_special_tokens=False)
        assert tok.decode(ids, skip_special=True) == hf(name).decode(tokenizer.ids, skip_special_tokens=True)
    assert stable > len(texts) // 2


@pytest.mark.parametrize("name", NAMES)
def test_prefix_suffix_and_parts(name: str) -> None:
    tok = ours(name)
    special = next(iter(tok.special_tokens))
    ids = tok.encode("hi there", prefix=[special], suffix=[special])
    assert ids == [tok.special_token_id(special), *tok.encode("hi there"), tok.special_token_id(special)]
    assert tok.count("hi there", prefix=[special]) == len(tok.encode("hi there")) + 1
    assert tok.encode(special) == hf_ids(name, [special])[0] != [tok.special_token_id(special)]


def test_isolated_splits_keep_unmatched_stretches() -> None:
    splits = IsolatedSplits([r"\d{1,3}", r"[a-z]+"])
    assert splits.pieces("ab12345 cd!") == ["ab", "123", "45", " ", "cd", "!"]
    assert list(splits.pieces_with_offsets("x1 ")) == [("x", 0), ("1", 1), (" ", 2)]
    assert splits.pieces("") == []


def test_python_engine_setting_keeps_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENGINE_ENV, "python")
    assert isinstance(from_hf_json(document("qwen3"), "qwen3-env"), Pipeline)


def test_files_outside_the_fast_path_keep_the_pipeline() -> None:
    doc = dict(document("qwen3"))
    lower = {**doc, "normalizer": {"type": "Lowercase"}}
    assert not fast(from_hf_json(lower, "lower"))
    swapped = json.loads(json.dumps(doc))
    merges = swapped["model"]["merges"]
    merges[0], merges[1] = merges[1], merges[0]  # merge order no longer rank order
    assert not fast(from_hf_json(swapped, "swapped"))
    pipeline = from_hf_json(doc, "qwen3-python", backend="python")
    assert isinstance(pipeline, Pipeline) and not fast(pipeline) and pipeline.text_path != "text-encoder"
    assert isinstance(byte_level_rank_bpe(doc, pipeline.model, "qwen3-python", None), ByteLevelRankBPE)
    assert byte_level_rank_bpe(lower, pipeline.model, "lower", None) is None
    assert not fast(get_tokenizer("gemma3"))


#: The code-point sweep's contexts (as the tiktoken sweep's) and one for the NFC/added-token interplay.
SWEEP_CONTEXTS = ("a{c}b {c}{c}1 {c}'s x{c} \n{c}", "'{c} A{c}a/{c}\r\n9{c}9", "<think>{c}\u0301{c}</think>  {c}")
ALL_SCALARS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
SWEEP_BATCH = 2048


def sweep(name: str, stride: int) -> list[str]:
    """Every ``stride``-th batch of all scalar values rendered into each context: the code points (tried one by one
    in a differing batch) whose ids differ from Hugging Face's (the normalizer follows Hugging Face's older Unicode
    tables, so there is no exemption)."""
    tok = ours(name)
    bad: list[str] = []
    for context in SWEEP_CONTEXTS:
        parts = context.split("{c}")
        for start in range(0, len(ALL_SCALARS), SWEEP_BATCH * stride):
            batch = ALL_SCALARS[start : start + SWEEP_BATCH]
            text = "".join(chr(c).join(parts) for c in batch)
            if tok.encode(text) == hf(name).encode(text, add_special_tokens=False).ids:
                continue
            singles = [chr(c).join(parts) for c in batch]
            for c, single, w in zip(batch, singles, hf_ids(name, singles), strict=True):
                if tok.encode(single) != w:
                    bad.append(f"U+{c:04X}")
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_code_point_sample(name: str) -> None:
    """Every 24th batch of the sweep (the whole sweep is the slow test below)."""
    assert sweep(name, 24) == []


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not os.environ.get("FAST_SWEEP_FULL"), reason="development run: FAST_SWEEP_FULL=1 (~4 min each)")
@pytest.mark.parametrize("name", NAMES)
def test_every_code_point(name: str) -> None:
    """The whole sweep (every batch): a development run, ``FAST_SWEEP_FULL=1``; the suite runs the sample above."""
    assert sweep(name, 1) == []


@pytest.mark.parametrize("name", NAMES)
def test_literal_matcher_splits_as_the_pipelines_matcher(name: str) -> None:
    """The fast path's literal search gives the pipeline's added-token splits (specials skipped, longest first)."""
    tokens = get_tokenizer(name, backend="python").added_vocabulary  # type: ignore[attr-defined]
    entries = [(t.content, t) for t in tokens if not t.normalized] or [(t.content, t) for t in tokens]
    fast, reference = LiteralMatcher(entries), AddedMatcher(entries)
    texts = [*token_strings(name), *list(corpus.random_mixes(FUZZ_SEED + 2, 300)), "", "<", "<<||>>"]
    assert [fast.split(t) for t in texts] == [reference.split(t) for t in texts]


def test_literal_matcher_compiles_on_first_use_and_threads_agree() -> None:
    """The alternation is compiled on the first split that needs one (never for special tokens only); threads that
    race to the first split get the same cuts as the pipeline's matcher."""
    tokens = [AddedToken(content=c, id=i, special=c.startswith("<|")) for i, c in
              enumerate(["<|end|>", "<think>", "</think>", "<th", "ab"])]
    entries = [(t.content, t) for t in tokens]
    specials_only = LiteralMatcher([(t.content, t) for t in tokens if t.special])
    assert specials_only.split("x<|end|>y") == [(0, 9, None)] and not specials_only.compiled
    reference = AddedMatcher(entries)
    texts = ["", "<think>ab</think>", "<|end|><thinkab", "x" * 50 + "<th<think>", "abab<|end|>"]
    for _ in range(3):
        fast = LiteralMatcher(entries)
        assert not fast.compiled
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda _, m=fast: [m.split(x) for x in texts], range(16)))
        assert fast.compiled
        assert got == [[reference.split(x) for x in texts]] * 16


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled stretches", "windows"])
def test_nfc_windows_equal_whole_text_nfc(compiled: bool) -> None:
    tok = ours("qwen3")
    encoder = model("qwen3").text_encoder(tok.normalizer, tok.pre_tokenizer, tok.added_vocabulary)
    assert isinstance(encoder, RankTextEncoder)
    if compiled and native.nfc_apply() is None:
        pytest.skip("compiled core not built")
    if not compiled:
        encoder._nfc_apply = None  # noqa: SLF001 -- the Python windows, the path without the compiled core
    rng = random.Random(11)
    alphabet = "ae\u0301\u0323\u0328\u1100\u1161\u11a8가각\u212b\u0344xyz \u0f73\u0f71\u0f72\u095c\u064e\u0651"
    for _ in range(60):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000)))
        assert encoder.nfc_windows(text) == unicodedata.normalize("NFC", text)
