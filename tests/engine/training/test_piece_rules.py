"""SentencePiece's piece rules (:mod:`app.engine.training.piece_rules`): the script table, the rules on mixed-script
strings, the rules against ``sentencepiece``'s own trainer, and the compiled learners against the Python reference
with every rule on or off."""

from __future__ import annotations

import io
import itertools
import random
from collections import Counter

import pytest
import sentencepiece as spm

from app.engine.pipeline.sentencepiece import _model_proto_class, build_pipeline, parse_model
from app.engine.training import compiled
from app.engine.training.merges import learn_merges, text_order_key
from app.engine.training.piece_rules import PieceRules, script_of, sp_script
from app.engine.training.sentencepiece import SentencePieceTrainer
from app.engine.training.sp_scripts import NAMES, RUN_SCRIPTS, RUN_STARTS, UNICODE_VERSION
from app.engine.training.trainer import train_on
from app.engine.training.unigram import _seed_candidates

from .family_corpus import corpus_text, hostile_samples

SPACE = "\u2581"
needs_native = pytest.mark.skipif(not compiled.available(), reason="compiled trainer not built")
#: Characters the rules treat specially, beside the test corpus's: the tab and U+001F, combining marks (Latin,
#: Arabic, Thai), kana and the prolonged sound mark, full-width digits and letters, a script added after Unicode
#: 9.0.0 (Masaram Gondi, U+11D00: Common for SentencePiece), Hebrew, Arabic, Greek, Cyrillic.
EXTRA = ("\t\x1f\u0301\u0300\u064b\u0e31\u3042\u30a2\u30fc\u6f22\uff11\uff19\uff21\U00011d00\u05d0\u0627\u00e9"
         "\u03b1\u0431")
#: Every rule combination the trainers accept.
OPTION_SETS = [{}, {"split_by_number": False}, {"split_by_unicode_script": False}, {"split_digits": True},
               {"split_by_whitespace": False}, {"split_by_unicode_script": False, "split_by_whitespace": False},
               {"max_length": 3}]


def _name(ch: str) -> str:
    return NAMES[script_of(ch)]


def test_script_table_is_unicode_9() -> None:
    assert UNICODE_VERSION == "9.0.0" and NAMES[:2] == ("Common", "Inherited") and RUN_STARTS[0] == 0
    assert list(RUN_STARTS) == sorted(set(RUN_STARTS)) and len(RUN_STARTS) == len(RUN_SCRIPTS)
    assert [_name(c) for c in "a\u0431\u03b1\u6f22\u3042\u30a2\u0301\u0e01\u05d0\u0627,1\uff11 "] == [
        "Latin", "Cyrillic", "Greek", "Han", "Hiragana", "Katakana", "Inherited", "Thai", "Hebrew", "Arabic",
        "Common", "Common", "Common", "Common"]
    assert _name("\u30fc") == "Common" and sp_script("\u30fc") == sp_script("\u3042") == sp_script("\u6f22")
    assert _name("\U00011d00") == "Common"  # Masaram Gondi is Unicode 10.0: unknown to 9.0.0, so Common
    assert _name("\U0001f923") == "Common" and _name("\U000e0100") == "Inherited"  # 9.0 emoji; a variation selector


@needs_native
def test_compiled_table_equals_the_python_table() -> None:
    table = compiled.trainer_module.sp_scripts()
    runs = list(RUN_STARTS) + [0x110000]
    expected = bytearray()
    for k, s in enumerate(RUN_SCRIPTS):
        expected += bytes([s]) * (runs[k + 1] - runs[k])
    assert table == bytes(expected)


SP = PieceRules.sentencepiece()


@pytest.mark.parametrize(("piece", "rules", "ok"), [
    ("▁the", SP, True), ("the▁", SP, False), ("a▁b", SP, False),
    ("ab", SP, True), ("aб", SP, False), ("бa", SP, False), ("αβ", SP, True),  # one script per piece
    ("a,", SP, False), (",a", SP, False), (".,", SP, True), ("▁,", SP, True),  # punctuation is Common
    ("a1", SP, False), ("12", SP, True), ("1,", SP, True), ("１2", SP, True),  # digits are Common
    ("ひら", SP, True), ("カタ", SP, True), ("ひカ漢ー", SP, True), ("ーa", SP, False),  # kana and ー are Han
    ("é", SP, True), ("a\u0301b", SP, True), ("a\u0301б", SP, False), ("\u0301a", SP, True),  # marks inherit
    ("▁\u0301a", SP, True), ("1\u0301a", SP, False),
    ("\U00011d00,", SP, True), ("\U00011d00a", SP, False),  # a post-9.0 script is Common
    ("a" * 16, SP, True), ("a" * 17, SP, False), ("▁" + "a" * 15, SP, True),
    ("a\0", SP, False), (",\x1f", SP, False), ("a\u2585", SP, False),  # never in a piece
    ("\t,", SP, True), ("a\tb", PieceRules.sentencepiece(split_by_unicode_script=False), True),  # a tab may be
    # split_by_number off: a digit matches any script and the next character starts afresh
    ("a1", PieceRules.sentencepiece(split_by_number=False), True),
    ("a1б", PieceRules.sentencepiece(split_by_number=False), True),
    ("aб1", PieceRules.sentencepiece(split_by_number=False), False),
    ("1\u0301б", PieceRules.sentencepiece(split_by_number=False), True),
    # split_digits: no digit in a piece of two or more
    ("12", PieceRules.sentencepiece(split_digits=True), False), ("１a", PieceRules.sentencepiece(split_digits=True),
                                                                 False),
    # split_by_unicode_script off: anything mixes
    ("aб1,漢", PieceRules.sentencepiece(split_by_unicode_script=False), True),
    # split_by_whitespace off: ▁ anywhere but at the end
    ("a▁b", PieceRules.sentencepiece(split_by_whitespace=False), True),
    ("▁a▁b", PieceRules.sentencepiece(split_by_whitespace=False), True),
    ("ab▁", PieceRules.sentencepiece(split_by_whitespace=False), False),
    ("▁▁", PieceRules.sentencepiece(split_by_whitespace=False), False),
    ("a▁б", PieceRules.sentencepiece(split_by_whitespace=False), False),  # ▁ has no script of its own
    # the unigram kind's rules: only "▁ first"
    ("aб1,", PieceRules(), True), ("a▁", PieceRules(), False),
])
def test_rules_on_mixed_script_strings(piece: str, rules: PieceRules, ok: bool) -> None:
    assert rules(piece) is ok


def test_prefix_closed_rules_stop_scans() -> None:
    nows = PieceRules.sentencepiece(split_by_whitespace=False)
    assert not nows("ab▁") and nows.extends("ab▁") and nows("ab▁c")  # the one rule that is not prefix-closed
    assert not SP.extends("aб") and not SP.extends("aбc") and SP.extends("ab")
    short = PieceRules.sentencepiece(max_length=3)
    assert [short.prefix_limit(t) for t in ("abcd", "aбcd", "ab", "▁a▁b")] == [3, 1, 2, 2]
    assert nows.prefix_limit("ab▁c▁") == 5 and not nows.end_ok("ab▁c▁") and nows.end_ok("ab▁c")


def _probe_words(chars: list[str]) -> list[str]:
    anchors = ["a", "\u6f22", ",", "1", "\u0431", "\u3042", SPACE]
    words = {a + c for c in chars for a in anchors if a != c} | {c + a for c in chars for a in anchors if a != c}
    for mark in "\u0301\u064b":
        words |= {a + mark + b for a, b in itertools.permutations(anchors, 2)}
    words |= {"a▁b", "ab▁", "▁ab", "▁a▁", "▁▁", "a▁▁b", "漢▁a", "1▁\u0301", "a1б", "1\u0301б"}
    return sorted(words)


@pytest.mark.parametrize("options", OPTION_SETS[:5])
def test_rules_match_sentencepiece_trainer(options: dict[str, object]) -> None:
    """``sentencepiece``'s BPE trainer learns every valid two- and three-character word of a corpus of such words
    (each seen three times; vocabulary unbounded) and no invalid one: its set of learned words is the rule."""
    chars = sorted((set(corpus_text()) | set(EXTRA)) - set(" \n\r\0" + SPACE))
    words = _probe_words(chars)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([w for w in words for _ in range(3)]), model_writer=model, model_type="bpe",
        vocab_size=len(chars) + len(words) + 100, hard_vocab_limit=False, character_coverage=1.0,
        add_dummy_prefix=False, normalization_rule_name="identity", minloglevel=2, **options)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    learned = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    rules = PieceRules.sentencepiece(**options)  # type: ignore[arg-type]
    wrong = [w for w in words if (w in learned) != rules(w)]
    assert not wrong, wrong[:20]
    assert 0 < sum(map(rules, words)) < len(words) or not options.get("split_by_unicode_script", True)


def _random_words(rng: random.Random, n: int) -> dict[str, int]:
    alphabet = "ab1２,." + SPACE + "б\u0301ひカー漢\U00011d00\t\x1f"
    words: Counter[str] = Counter()
    for _ in range(n):
        w = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        words[w] += rng.choice((1, 1, 2, 5))
    return dict(words)


def _rules(options: dict[str, object]) -> PieceRules:
    return PieceRules.sentencepiece(**options)  # type: ignore[arg-type]


@needs_native
@pytest.mark.parametrize(("seed", "options"), list(enumerate(OPTION_SETS)))
def test_compiled_seeds_equal_the_python_reference(seed: int, options: dict[str, object]) -> None:
    rng = random.Random(seed)
    words = _random_words(rng, 600)
    items = list(words.items())
    rules = _rules(options)
    max_len = rng.choice([4, 16])
    uw = compiled.trainer_module.UnigramWords([w for w, _ in items], [f for _, f in items], max_len)
    python_seeds = _seed_candidates(items, rules, max_len, 100_000)
    assert uw.seed(*rules.native(), 2, 100_000) == python_seeds
    assert all(rules(s) for _, s in python_seeds)
    assert len(python_seeds) < len(_seed_candidates(items, PieceRules(marker=None), max_len, 100_000))


@needs_native
@pytest.mark.parametrize(("seed", "options"), list(enumerate(OPTION_SETS)))
def test_compiled_merges_equal_the_python_reference(seed: int, options: dict[str, object]) -> None:
    rng = random.Random(100 + seed)
    words = _random_words(rng, 800)
    alphabet = sorted({c for w in words for c in w})
    index = {c: i for i, c in enumerate(alphabet)}
    rules = _rules(options)
    opts = dict(base_symbols=alphabet, concat=lambda x, y: x + y, order_key=text_order_key, unit_length=len,
                max_symbols=len(alphabet) + 300, min_frequency=2, tie_break="first-seen", valid=rules)
    py = learn_merges([[index[c] for c in w] for w in words], list(words.values()), **opts)  # type: ignore[arg-type]
    native = compiled.learn_merges_native(list(words), list(words.values()), keep_words=False,
                                          alphabet="".join(alphabet), **opts)  # type: ignore[arg-type]
    assert native.merges == py.merges and native.symbols == py.symbols and native.stop_reason == py.stop_reason
    learned = py.symbols[len(alphabet):]
    assert learned and all(rules(str(s)) for s in learned)
    free = learn_merges([[index[c] for c in w] for w in words], list(words.values()),
                        **{**opts, "valid": None})  # type: ignore[arg-type]
    assert any(not rules(str(s)) for s in free.symbols[len(alphabet):])  # the rules did refuse something


@pytest.fixture(scope="module")
def text() -> str:
    rng = random.Random(7)
    mixed = ["".join(rng.choice(["abc", "где", "ひら", "カナー", "漢字", "12", "１２", ",.", "e\u0301", " "])
                     for _ in range(rng.randint(3, 20))) for _ in range(400)]
    return corpus_text(60_000) + "\n".join(mixed) + "\n"


@needs_native
@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("options", [{}, {"split_by_whitespace": False, "split_by_number": False},
                                     {"split_by_unicode_script": False, "split_digits": True}])
def test_trained_models_equal_across_backends_and_encode_as_sentencepiece(text: str, model_type: str,
                                                                          options: dict[str, object]) -> None:
    """Both backends write the same ``.model``; every learned piece obeys the rules; the options are recorded in
    the ``TrainerSpec``; ``sentencepiece`` loads it and this engine encodes and decodes as it does."""
    arts = [train_on(SentencePieceTrainer(model_type=model_type, vocab_size=900, backend=b,
                                          **options), [text])  # type: ignore[arg-type]
            for b in ("native", "python")]
    assert arts[0].data == arts[1].data
    proto = _model_proto_class()()
    proto.ParseFromString(arts[0].data)
    ts = proto.trainer_spec
    assert (ts.split_by_unicode_script, ts.split_by_number, ts.split_by_whitespace, ts.split_digits,
            ts.max_sentencepiece_length) == (options.get("split_by_unicode_script", True),
                                             options.get("split_by_number", True),
                                             options.get("split_by_whitespace", True),
                                             options.get("split_digits", False), 16)
    rules = PieceRules.sentencepiece(**{k: v for k, v in options.items()})  # type: ignore[arg-type]
    learned = [p.piece for p in proto.pieces if p.type == 1 and len(p.piece) > 1]
    assert learned and all(rules(p) for p in learned)
    if not options.get("split_by_whitespace", True) and model_type == "unigram":
        assert any(SPACE in p[1:] for p in learned)  # pieces across words exist
    sp = spm.SentencePieceProcessor(model_proto=arts[0].data)
    ours = build_pipeline("t", parse_model(arts[0].data, "t.model"), source="t.model")
    for s in hostile_samples(text, 120):
        ids = sp.encode(s)
        assert list(ours.encode(s)) == ids, s
        assert ours.decode(ids) == sp.decode(ids), s


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_unit_separator_is_never_a_piece_and_the_tab_is_as_in_sentencepiece(model_type: str) -> None:
    """``sentencepiece`` 0.2.3's trainer never makes U+001F a piece nor lets a piece span it; a tab is an ordinary
    (``Common``) character. Both trainers learn the same characters here."""
    text = ("ab\x1fcd ,\t, ef\tgh\n" * 300 + "ab\x1f\x1f,,\n" * 100)
    art = train_on(SentencePieceTrainer(model_type=model_type, vocab_size=40, character_coverage=1.0), [text])
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text.splitlines()), model_writer=model,
                                   model_type=model_type, vocab_size=40, character_coverage=1.0,
                                   normalization_rule_name="identity", hard_vocab_limit=False, minloglevel=2)
    pieces = {}
    for who, data in (("ours", art.data), ("peer", model.getvalue())):
        sp = spm.SentencePieceProcessor(model_proto=data)
        pieces[who] = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    assert not any("\x1f" in p for p in pieces["ours"]) and not any("\x1f" in p for p in pieces["peer"])
    assert {p for p in pieces["ours"] if len(p) == 1} == {p for p in pieces["peer"] if len(p) == 1}
    assert "\t" in pieces["ours"] and any("\t" in p and len(p) > 1 for p in pieces["ours"])
    sp = spm.SentencePieceProcessor(model_proto=art.data)
    ours = build_pipeline("t", parse_model(art.data, "t.model"), source="t.model")
    for s in ["ab\x1fcd", "\x1f", ",\t,", text[:200]]:
        assert list(ours.encode(s)) == sp.encode(s), s


@needs_native
def test_refused_pairs_are_never_counted() -> None:
    """A corpus whose every pair mixes scripts has nothing to merge: no pair is left, in C as in Python."""
    words = {"aб": 5, "бa": 3, "a1": 4, "漢a": 2}
    alphabet = sorted({c for w in words for c in w})
    index = {c: i for i, c in enumerate(alphabet)}
    opts = dict(base_symbols=alphabet, concat=lambda x, y: x + y, order_key=text_order_key, unit_length=len,
                max_symbols=100, min_frequency=2, tie_break="first-seen", valid=SP)
    py = learn_merges([[index[c] for c in w] for w in words], list(words.values()), **opts)  # type: ignore[arg-type]
    native = compiled.learn_merges_native(list(words), list(words.values()), keep_words=False,
                                          alphabet="".join(alphabet), **opts)  # type: ignore[arg-type]
    assert py.merges == native.merges == [] and py.stop_reason == native.stop_reason == "no pairs left"
