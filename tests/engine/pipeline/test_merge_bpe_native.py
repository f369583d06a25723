"""The compiled merge-list BPE (``app/engine/_native/mergebpe.c``) against the pure-Python reference
(``app.engine.pipeline.models.bpe``): random vocabularies and merge lists (duplicate pairs, merges out of
result order, byte fallback with missing bytes, unknown tokens fused or not, pieces on both sides of the
heap threshold), and the bundled gemma3 file on the hostile corpus and real text (also against Hugging Face).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from app.engine import get_tokenizer
from app.engine.pipeline import Pipeline
from app.engine.pipeline.added import AddedMatcher, AddedToken
from app.engine.pipeline.hf_json import load_hf_json
from app.engine.pipeline.models import bpe as bpe_module
from app.engine.pipeline.models.bpe import BPE, BPEError
from app.engine.pipeline.pipeline import SEGMENT_FROM
from app.engine.store import Store
from harness import realtext

from .corpus import hostile, long_strings
from .merge_models import ALPHABET, random_bpe_config, random_text
from .reference import reference

pytestmark = pytest.mark.skipif(bpe_module._EXT.module is None,
                                reason=f"compiled merge-list BPE not built: {bpe_module._EXT.error}")

def test_random_models_match_the_reference() -> None:
    rng = random.Random(20261201)
    compared = 0
    for _ in range(400):
        config = random_bpe_config(rng)
        native = BPE.from_hf(config, backend="native")
        python = BPE.from_hf(config, backend="python")
        assert native.backend == "native" and python.backend == "python"
        texts = [random_text(rng, rng.choice([0, 1, 2, 5, 20, 47, 48, 49, 120, 400])) for _ in range(25)]
        for text in texts:
            assert native.tokenize(text) == python.tokenize(text), (config, text)
            compared += 1
        items: list[str | int] = [x for t in texts for x in (t, rng.randrange(10**6))]  # ids pass through
        assert native.encode_pieces(items, SEGMENT_FROM) == python.encode_pieces(items, SEGMENT_FROM)
    assert compared == 400 * 25


def test_added_token_finder_matches_the_reference() -> None:
    rng = random.Random(5)
    for _ in range(200):
        patterns = ["".join(rng.choice("ab\n<>▁😀") for _ in range(rng.randint(1, 4)))
                    for _ in range(rng.randint(1, 12))]
        tokens = [AddedToken(p, i, special=rng.random() < 0.3) for i, p in enumerate(patterns)]
        matcher = AddedMatcher([(t.content, t) for t in tokens])
        assert matcher._native is not None
        native = matcher._native
        for _ in range(10):
            text = "".join(rng.choice("ab\n<>▁😀x ") for _ in range(rng.randint(0, 60)))
            found = matcher._find(text) if matcher._starts is not None else []
            matcher._native = None
            expected = matcher._find(text) if matcher._starts is not None else []
            matcher._native = native
            assert found == expected, (patterns, text)


def test_bad_merge_lists_raise_the_reference_errors() -> None:
    vocab = {"a": 0, "b": 1, "ab": 2}
    for merges in (["a c"], ["ab"], [["a"]], [["a", "b"], "b a"]):
        with pytest.raises(BPEError) as native_error:
            BPE.from_hf({"vocab": vocab, "merges": merges}, backend="native")
        with pytest.raises(BPEError) as python_error:
            BPE.from_hf({"vocab": vocab, "merges": merges}, backend="python")
        assert str(native_error.value) == str(python_error.value)


def test_options_the_core_does_not_support_stay_on_the_reference() -> None:
    vocab = {"a": 0, "##a": 1, "aa": 2}
    model = BPE(vocab, [("a", "##a")], continuing_subword_prefix="##", backend="native")
    assert model.backend == "python" and model.native is None
    assert model.tokenize("aa") == [2]


def test_engine_python_forces_the_reference() -> None:
    code = ("from app.engine.pipeline.models.bpe import BPE\n"
            "m = BPE({'a': 0, 'b': 1, 'ab': 2}, [('a', 'b')])\n"
            "assert m.backend == 'python', m.backend\n"
            "assert m.tokenize('abab') == [2, 2]\n")
    env = {**os.environ, "TOKENIZER_ENGINE": "python"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.fixture(scope="module")
def gemma3_python() -> Pipeline:
    tok = load_hf_json(Store.load().spec("gemma3"), backend="python")
    assert isinstance(tok, Pipeline) and tok.backend == "python"
    return tok


def gemma3_native() -> Pipeline:
    """gemma3 as the service loads it on the native backend (the compiled merge BPE)."""
    tok = get_tokenizer("gemma3", backend="native")
    assert isinstance(tok, Pipeline), type(tok)
    return tok


def test_gemma3_runs_native() -> None:
    assert gemma3_native().backend == "native" and gemma3_native().text_path == "text-plan"


def test_gemma3_matches_the_reference_and_hugging_face(gemma3_python: Pipeline) -> None:
    native = gemma3_native()
    hf = reference("gemma3")
    texts = list(hostile([*native.special_tokens, *native.added_tokens], seed=31, count=500, token_limit=40))
    docs = realtext.documents()
    texts += [s for doc in docs for s in realtext.strings(doc)][::7]
    texts += [doc.text for doc in docs if len(doc.text) < 30_000][:12]
    texts += long_strings(20_000)
    mismatches = []
    for text in texts:
        ids = native.encode(text)
        if ids != gemma3_python.encode(text) or ids != hf.encode(text, add_special_tokens=False).ids:
            mismatches.append(text[:80])
    assert len(texts) > 2000
    assert not mismatches, mismatches[:5]


# -- the text-plan path: added tokens, normalizer, cut, model and segment cache in one compiled call ----------------


def _plan_pipeline(config: dict, added: list[AddedToken], backend: str, *,  # type: ignore[type-arg]
                   replace: tuple[str, str] | None, split: str | None, cache_size: int = 64) -> Pipeline:
    from app.engine.pipeline.normalizers import Replace
    from app.engine.pipeline.pattern import HFPattern
    from app.engine.pipeline.pre_tokenizers import Split

    normalizer = Replace(HFPattern(string=replace[0]), replace[1]) if replace is not None else None
    pre_tokenizer = Split(HFPattern(string=split), "MergedWithPrevious") if split is not None else None
    return Pipeline(name="plan", model=BPE.from_hf(config, backend=backend), normalizer=normalizer,
                    pre_tokenizer=pre_tokenizer, added_tokens=added, cache_size=cache_size, backend=backend)


def _plan_texts(rng: random.Random, added: list[AddedToken]) -> list[str]:
    contents = [t.content for t in added] or ["x"]
    pool = [*ALPHABET, *"xyz😀ß\u0301", "\ud800", "\udc00", "\ud83d\ude00"]
    texts = ["", " ", "▁" * 300, "a" * 700, "".join(contents), "".join(contents) * 3, " " * 50, "\ud800",
             "ab" * 400 + "".join(contents)]
    for _ in range(40):
        parts = [rng.choice(contents) if rng.random() < 0.25 else rng.choice(pool)
                 for _ in range(rng.choice([1, 3, 10, 40, 200]))]
        texts.append("".join(parts))
    return texts


def test_text_plan_matches_the_reference_on_random_pipelines() -> None:
    rng = random.Random(20261204)
    planned = 0
    for _ in range(150):
        config = random_bpe_config(rng)
        added = [AddedToken("".join(rng.choice("ab<>▁\n 😀") for _ in range(rng.randint(1, 4))), 1000 + i,
                            special=rng.random() < 0.3) for i in range(rng.choice([0, 1, 5, 12]))]
        replace = rng.choice([None, (" ", "▁"), (" ", "ab"), ("a", ""), ("▁", " ")])
        split = " " if replace is not None and replace[0] == " " and rng.random() < 0.5 else None
        native = _plan_pipeline(config, added, "native", replace=replace, split=split)
        python = _plan_pipeline(config, added, "python", replace=replace, split=split)
        assert python.text_path == "python"
        planned += native.text_path == "text-plan"
        for text in _plan_texts(rng, added):
            assert native.encode(text) == python.encode(text), (config, added, replace, text)
            assert native.count(text) == len(python.encode(text))
    assert planned == 150  # every configuration above has a plan


def test_text_plan_declines_what_it_does_not_run() -> None:
    config = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, " ": 3}, "merges": ["a b"]}
    lstrip = [AddedToken("b", 7, lstrip=True)]
    assert _plan_pipeline(config, lstrip, "native", replace=None, split=None).text_path != "text-plan"
    normalized = [AddedToken("b", 7, normalized=True)]
    assert _plan_pipeline(config, normalized, "native", replace=None, split=None).text_path != "text-plan"
    # a split that can match after the normalizer cuts text: not a plan
    assert _plan_pipeline(config, [], "native", replace=None, split=" ").text_path != "text-plan"
    assert _plan_pipeline(config, [], "native", replace=(" ", "a b"), split=" ").text_path != "text-plan"
    python = _plan_pipeline(config, [], "python", replace=None, split=" ")
    native = _plan_pipeline(config, [], "native", replace=None, split=" ")
    assert native.encode("ab ab  b") == python.encode("ab ab  b")


def test_text_plan_cache_counts_and_clears() -> None:
    config = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "▁": 3}, "merges": ["a b"]}
    tok = _plan_pipeline(config, [], "native", replace=(" ", "▁"), split=None, cache_size=32)
    assert tok.text_path == "text-plan"
    assert tok.encode("ab ab") == [2, 3, 2]
    stats = tok.cache_stats()
    assert stats.max_size == 32 and stats.hits + stats.misses >= 1
    assert tok.encode("ab ab") == [2, 3, 2]
    assert tok.cache_stats().hits > stats.hits
    tok.clear_cache()
    assert tok.cache_stats().hits == 0 and tok.encode("ab ab") == [2, 3, 2]


def test_text_plan_gemma3_hostile_runs(gemma3_python: Pipeline) -> None:
    native = gemma3_native()
    tokens = list(native.added_tokens)
    texts = ["", "<mask>" * 200, "".join(tokens[:300]), "\n" * 5000, "\t" * 999 + "x", "▁" * 5000, " " * 5000,
             "a" * 50_000, "😀" * 3000, "\ud800" * 100 + "a", "<b>" + "ab" * 5000 + "</b>", "<bos><eos>" * 50]
    for text in texts:
        assert native.encode(text) == gemma3_python.encode(text), text[:40]
