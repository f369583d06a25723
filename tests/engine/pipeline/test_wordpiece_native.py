"""The compiled WordPiece core (``app/engine/_native/wordpiece.c``) against the pure-Python reference
(``app.engine.pipeline.models.wordpiece`` and ``app.engine.pipeline.bert``) and Hugging Face ``tokenizers``:

* random vocabularies (continuing prefixes, excluded ids, tiny ``max_input_chars_per_word``) for the model alone;
* the character tables: the core's BERT normalizer per code point, every code point, every option combination;
* bge-small-en-v1.5 (GGUF ``bert``) on hostile, multilingual and long inputs: compiled == Python == HF;
* ``tokenizer.json`` WordPiece files of the same shape with other normalizer options and added tokens;
* text where NFD reorders across characters (the core sorts runs; the reference normalizes the whole text),
  surrogates, threads and ``$TOKENIZER_ENGINE=python``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from functools import cache
from itertools import product
from typing import Any

import pytest

from app.engine import get_tokenizer
from app.engine.encoding import scrub_surrogates
from app.engine.pipeline import Pipeline
from app.engine.pipeline.bert import BertNormalizer, combining_class
from app.engine.pipeline.bert_tables import REORDERING
from app.engine.pipeline.gguf import _bert_doc
from app.engine.pipeline.hf_json import from_hf_json
from app.engine.pipeline.models import wordpiece as wordpiece_module
from app.engine.pipeline.models.wordpiece import WordPiece
from harness.references import gguf_kv
from harness.texts import HOSTILE_RUNS as BENCH_HOSTILE
from harness.texts import SPECIAL_STRINGS, sample
from tests.engine.families.test_wordpiece import hf_bert

from .corpus import hostile, long_strings

pytestmark = pytest.mark.skipif(wordpiece_module._EXT.module is None,
                                reason=f"compiled WordPiece not built: {wordpiece_module._EXT.error}")
EXT: Any = wordpiece_module._EXT.module

#: Characters NFD reorders (kept through accent stripping), marks of several classes, letters: for the
#: whole-text normalizer.
REORDER_POOL = [*map(chr, sorted(REORDERING)), "\u0301", "\u0316", "\u0334", "\u0345", "\u05b8", "\u0941", "\u093c",
                "a", "É", " ", "\u4e00", "\x01", "\u00ad"]


def _reorder_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(REORDER_POOL) for _ in range(rng.randint(1, 12))) for _ in range(count)]


@cache
def bge_doc() -> dict[str, Any]:
    return _bert_doc(gguf_kv("bge-small-en-v1.5"), "bge")


def _pair(doc: dict[str, Any]) -> tuple[Pipeline, Pipeline]:
    native = from_hf_json(doc, "wp", backend="native")
    python = from_hf_json(doc, "wp", backend="python")
    assert isinstance(native, Pipeline) and isinstance(python, Pipeline)
    assert native.backend == "native" and python.backend == "python"
    return native, python


@cache
def corpus() -> list[str]:
    """Hostile strings, real multilingual text, long runs and the bench's adversarial inputs (seeded)."""
    texts = list(hostile(["[CLS]", "[SEP]", "[UNK]", "[MASK]", "##", "##s"], seed=17, count=3000, token_limit=10))
    texts += sample(60, 1500, seed=23)
    texts += long_strings(20_000)
    texts += [gen(5_000) for gen in BENCH_HOSTILE.values()]
    texts += [c * n + " " + c * (n + 1) for c in ("x", "é", "日", "\u0378") for n in (99, 100, 101)]
    texts += ["abcdefghij" * 9 + "abcdefghi\u0378", "a" + "\u0301" * 500, "\ud800 a\ud83d\ude00b \udfff"]
    return [t for t in texts if not any(s in t for s in SPECIAL_STRINGS)]


# -- the model alone ---------------------------------------------------------------------------------------------

def test_random_vocabularies_match_the_reference() -> None:
    rng = random.Random(20261201)
    alphabet = "abc#é日😀"
    compared = 0
    for _ in range(300):
        prefix = rng.choice(["##", "##", "@", ""])
        vocab: dict[str, int] = {"[UNK]": 0}
        for _ in range(rng.randint(1, 40)):
            word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
            vocab.setdefault(prefix + word if rng.random() < 0.5 else word, rng.randrange(1, 10_000))
        excluded = set(rng.sample(sorted(vocab.values()), min(3, len(vocab)))) if rng.random() < 0.3 else set()
        excluded.discard(0)
        max_chars = rng.choice([0, 1, 3, 8, 100])
        options = {"continuing_subword_prefix": prefix, "max_input_chars_per_word": max_chars, "excluded": excluded}
        native = WordPiece(vocab, backend="native", **options)  # type: ignore[arg-type]
        python = WordPiece(vocab, backend="python", **options)  # type: ignore[arg-type]
        assert native.backend == "native" and python.backend == "python"
        words = ["".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 2, 3, 7, 9, 30]))) for _ in range(30)]
        for w in words:
            assert native.tokenize(w) == python.tokenize(w), (vocab, options, w)
            compared += 1
        items: list[str | int] = [x for w in words for x in (w, rng.randrange(10**6))]  # ids pass through
        assert native.encode_pieces(items, 16) == python.encode_pieces(items, 16)
    assert compared == 300 * 30


def test_engine_python_forces_the_reference() -> None:
    code = ("from app.engine import get_tokenizer\n"
            "t = get_tokenizer('bge-small-en-v1.5')\n"
            "assert t.backend == 'python' and t.model.native is None and t.text_path == 'python', t.backend\n"
            "assert t.encode('Hello, wörld!') == [7592, 1010, 2088, 999]\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TOKENIZER_ENGINE": "python"})


# -- the character tables ---------------------------------------------------------------------------------------

def _options(clean: bool, chinese: bool, strip: bool, lower: bool) -> int:
    return (EXT.CLEAN * clean) | (EXT.CHINESE * chinese) | (EXT.STRIP * strip) | (EXT.LOWER * lower)


def test_tables_equal_the_reference_on_every_code_point() -> None:
    """Per character the rule is context free (outside REORDERING), so one string of every code point (one sweep
    per option combination; a sample of code points for the combinations bge does not use) compares the tables."""
    everything = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and c not in REORDERING]
    rng = random.Random(4)
    some = rng.sample(everything, 40_000)
    for clean, chinese, strip, lower in product((True, False), repeat=4):
        chars = everything if (clean, chinese, strip, lower) == (True, True, True, True) else some
        text = "".join(chars)
        ours = EXT.Model.normalize(text, _options(clean, chinese, strip, lower))
        ref = BertNormalizer(clean_text=clean, handle_chinese_chars=chinese, strip_accents=strip, lowercase=lower)
        if ours != ref.normalize_str(text):
            wrong = [hex(ord(c)) for c in chars if EXT.Model.normalize(c, _options(clean, chinese, strip, lower))
                     != ref.normalize_str(c)]
            pytest.fail(f"options {(clean, chinese, strip, lower)}: {len(wrong)} code points differ: {wrong[:10]}")


def test_reordering_characters_are_left_to_the_whole_text_normalizer() -> None:
    for c in map(chr, sorted(REORDERING)):
        assert EXT.Model.normalize("a" + c, _options(True, True, True, True)) is None
        assert EXT.Model.normalize("a" + c, _options(True, True, False, True)) is not None  # no NFD, no reordering


# -- bge-small-en-v1.5 ---------------------------------------------------------------------------------------------

def test_bge_runs_the_fused_path() -> None:
    tok = get_tokenizer("bge-small-en-v1.5")
    assert isinstance(tok, Pipeline) and tok.backend == "native" and tok.text_path == "fused"


def test_bge_compiled_equals_python_and_hugging_face() -> None:
    native, python = get_tokenizer("bge-small-en-v1.5", backend="native"), get_tokenizer("bge-small-en-v1.5",
                                                                                         backend="python")
    assert native.backend == "native" and python.backend == "python"
    hf = hf_bert()
    texts = corpus() + _reorder_texts(8, 400)
    wrong = []
    for text in texts:
        ids = native.encode(text)
        # (the service turns lone surrogates into U+FFFD before any tokenizer; Hugging Face refuses them)
        if ids != python.encode(text) or ids != hf.encode(scrub_surrogates(text), add_special_tokens=False).ids:
            wrong.append(text[:60])
    assert len(texts) > 5000
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, first {wrong[:3]!r}"


def test_bge_template_counts_batches_and_decoding() -> None:
    tok = get_tokenizer("bge-small-en-v1.5")
    hf = hf_bert()
    texts = sample(10, 200, seed=29)
    texts = [t for t in texts if not any(s in t for s in SPECIAL_STRINGS)]
    assert tok.encode_batch(texts, num_threads=2) == [tok.encode(t) for t in texts]
    for text in texts[:80]:
        ids = tok.encode(text, add_special_tokens=True)
        assert ids == [101, *hf.encode(text, add_special_tokens=False).ids, 102]
        assert tok.count(text) == len(ids) - 2
        assert tok.decode(ids[1:-1]) == hf.decode(ids[1:-1])
        plain, spans = tok.encode_with_offsets(text)
        assert plain == ids[1:-1]
        assert spans == [tuple(o) for o in hf.encode(text, add_special_tokens=False).offsets]


def test_bge_reordering_text_ids_and_offsets() -> None:
    tok = get_tokenizer("bge-small-en-v1.5")
    text = "x a\U0001d16d\u0301\U0001d165 b\U0001d16d  c, d \U0001d165"
    hf = hf_bert()
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids
    for t in [text, *_reorder_texts(3, 600)]:  # offsets: the reference aligns reordered characters by position
        expected = hf.encode(t, add_special_tokens=False)
        assert tok.encode_with_offsets(t) == (expected.ids, [tuple(o) for o in expected.offsets]), t


# -- tokenizer.json files of the same shape ----------------------------------------------------------------------

def _hf_from_doc(doc: dict[str, Any]) -> Any:
    from tokenizers import Tokenizer

    added = [{"single_word": False, "lstrip": False, "rstrip": False, "normalized": True, **t}
             for t in doc["added_tokens"]]  # Hugging Face wants every option spelled out
    full = {"version": "1.0", "truncation": None, "padding": None, **doc, "added_tokens": added}
    return Tokenizer.from_str(json.dumps(full))


@pytest.mark.parametrize("normalizer", [
    {"lowercase": False},
    {"lowercase": False, "strip_accents": True},
    {"lowercase": True, "strip_accents": False},
    {"clean_text": False, "handle_chinese_chars": False},
    None,
])
def test_hf_json_bert_files_run_compiled_and_exactly(normalizer: dict[str, Any] | None) -> None:
    doc = dict(bge_doc())
    doc["normalizer"] = None if normalizer is None else {
        "type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
        "lowercase": True, **normalizer}
    doc["added_tokens"] = [*doc["added_tokens"], {"id": 30522, "content": "<extra>", "special": False,
                                                  "normalized": False, "single_word": False, "lstrip": False,
                                                  "rstrip": False}]
    native, python = _pair(doc)
    assert native.text_path == "fused"
    hf = _hf_from_doc(doc)
    texts = [t for t in corpus()[::4] if "<extra>" not in t] + _reorder_texts(9, 100)
    texts += ["a<extra>b", "<extra>", " <extra> x<extra>", "É<extra>\u4e00"]
    wrong = [t[:60] for t in texts if not native.encode(t) == python.encode(t)
             == hf.encode(scrub_surrogates(t), add_special_tokens=False).ids]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, first {wrong[:3]!r}"


def test_normalized_added_tokens_keep_the_pipeline_steps() -> None:
    doc = dict(bge_doc())
    doc["added_tokens"] = [*doc["added_tokens"], {"id": 30522, "content": "Foo Bar", "special": False,
                                                  "normalized": True}]
    native, python = _pair(doc)
    assert native.text_path == "native-items" and native.model.native is not None  # compiled WordPiece, pipeline steps
    hf = _hf_from_doc(doc)
    for text in ["foo bar", "xFOO BARy", "Foo  Bar", "a foo bar b FOO BAR", *corpus()[:400]]:
        expected = hf.encode(scrub_surrogates(text), add_special_tokens=False).ids
        assert native.encode(text) == python.encode(text) == expected, text


def test_reordering_decides_ids_where_the_vocabulary_sees_the_order() -> None:
    """A vocabulary holding the characters NFD reorders (alone, as continuations and in pairs), so the ids tell the
    orders apart: compiled (its run sorting) == Python (the whole-text normalizer) == Hugging Face."""
    by_class: dict[int, str] = {}  # one kept character per combining class: NFD orders them by class
    for c in map(chr, sorted(REORDERING)):
        if len(BertNormalizer().normalize_str(c)) == 1:
            by_class.setdefault(combining_class(c), c)
    kept = list(by_class.values())
    assert len(kept) >= 5
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}
    for piece in ["a", "b", "e", "##a", "##e", *kept, *("##" + c for c in kept),
                  *(x + y for x in kept for y in kept)]:
        vocab.setdefault(BertNormalizer().normalize_str(piece) if not piece.startswith("##") else piece, len(vocab))
    vocab["<extra>"] = len(vocab)
    doc = {**bge_doc(), "added_tokens": [{"id": 0, "content": "[UNK]", "special": True, "normalized": False},
                                         {"id": vocab["<extra>"], "content": "<extra>", "special": False,
                                          "normalized": False}],
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100, "vocab": vocab},
           "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]}}
    native, python = _pair(doc)
    hf = _hf_from_doc(doc)
    rng = random.Random(12)
    pool = [*kept, "\U0001d160", "\u0301", "\u0316", "\u0334", "\u0941", "a", "e", " ", " ", "<extra>", ","]
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 8))) for _ in range(1500)]
    unknown = 0
    for text in texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert native.encode(text) == python.encode(text) == expected, [hex(ord(c)) for c in text]
        unknown += expected.count(0)
    assert unknown < len(texts)  # the vocabulary does decide most of them


@pytest.mark.parametrize("backend", ["native", "python"])
def test_excluded_at_construction_equals_excluded_later(backend: str) -> None:
    """Special ids given to the constructor (as the tokenizer.json loader does) exclude what a later
    ``exclude_from_text`` excludes; excluding them again keeps the built model, new ids rebuild it."""
    vocab = {"[UNK]": 0, "[CLS]": 1, "un": 2, "##aff": 3, "##able": 4, "a": 5, "##ff": 6}
    at_once = WordPiece(vocab, excluded={1}, backend=backend)
    later = WordPiece(vocab, backend=backend)
    later.exclude_from_text({1})
    for text in ["unaffable", "[CLS]", "aff", "a"]:
        assert at_once.tokenize(text) == later.tokenize(text)
    built = at_once.native
    at_once.exclude_from_text({1})
    assert at_once.native is built and at_once.tokenize("unaffable") == [2, 3, 4]
    at_once.exclude_from_text({2})
    assert at_once.tokenize("unaffable") == [0] and at_once.backend == backend
