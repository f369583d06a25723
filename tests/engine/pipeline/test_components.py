"""Components one by one against the Hugging Face components that ``tokenizers`` exposes to Python:
normalizers (``normalize_str``), pre-tokenizers (``pre_tokenize_str``: pieces and their offsets) and decoders."""

from __future__ import annotations

import pytest
from tokenizers import decoders as hf_dec
from tokenizers import normalizers as hf_norm
from tokenizers import pre_tokenizers as hf_pre

from app.engine.pipeline import Piece
from app.engine.pipeline import decoders as dec
from app.engine.pipeline import normalizers as norm
from app.engine.pipeline import pre_tokenizers as pre
from app.engine.pipeline.pattern import HFPattern

from .corpus import CONTROLS, NFKC_SENSITIVE, SPACES

TEXTS = [
    "", "a", "Hello, World!", "  two  spaces  ", "tabs\tand\nnewlines\r\n", "don't I'll WE'RE", "3.14159 and 42",
    "ﬁne ①②③ ｆｕｌｌ", "Crème brûlée e\u0301", "ΣΑΣ σας", "İstanbul", "日本語のテキスト、句読点。", "한국어",
    "مرحبا بالعالم", "👍🏽 👨‍👩‍👧", "x" * 300, "a-b--c---d", "‼️⁉ ¿Qué? ¡Sí!", "▁already▁marked", " ▁ mixed ▁",
    "12345 ٠١٢ ²³ ½ Ⅻ", "under_score __init__", *NFKC_SENSITIVE, *CONTROLS, *[s + "x" + s for s in SPACES],
]  # fmt: skip


def _ours_normalize(n: norm.Normalizer, text: str) -> str:
    out = n.normalize(Piece.of(text, True))
    assert out.spans is not None and len(out.spans) == len(out.text)
    assert n.normalize_str(text) == out.text
    return out.text


NORMALIZERS = [
    (norm.Unicode("NFC"), hf_norm.NFC()), (norm.Unicode("NFD"), hf_norm.NFD()),
    (norm.Unicode("NFKC"), hf_norm.NFKC()), (norm.Unicode("NFKD"), hf_norm.NFKD()),
    (norm.Lowercase(), hf_norm.Lowercase()),
    (norm.NormalizerSequence([norm.Unicode("NFD"), norm.StripAccents()]),
     hf_norm.Sequence([hf_norm.NFD(), hf_norm.StripAccents()])),
    (norm.Replace(HFPattern(string=" "), "▁"), hf_norm.Replace(" ", "▁")),
    (norm.Replace(HFPattern(regex_source=r"\s+"), " "), hf_norm.Replace(hf_norm_regex := __import__(
        "tokenizers").Regex(r"\s+"), " ")),
    (norm.Prepend("▁"), hf_norm.Prepend("▁")),
    (norm.Strip(True, True), hf_norm.Strip(left=True, right=True)),
    (norm.Strip(False, True), hf_norm.Strip(left=False, right=True)),
]  # fmt: skip


@pytest.mark.parametrize(("ours", "ref"), NORMALIZERS, ids=[type(o).__name__ + str(i) for i, (o, _) in
                                                            enumerate(NORMALIZERS)])
def test_normalizers_match_hf(ours: norm.Normalizer, ref: object) -> None:
    for text in TEXTS:
        assert _ours_normalize(ours, text) == ref.normalize_str(text), repr(text)  # type: ignore[attr-defined]


def _pieces(p: pre.PreTokenizer, text: str) -> list[tuple[str, tuple[int, int]]]:
    out = []
    for piece in p.pre_tokenize([Piece.of(text, True)]):
        out.append((piece.text, piece.span(0, len(piece.text))))
    plain = [piece.text for piece in p.pre_tokenize([Piece.of(text, False)])]
    assert plain == [t for t, _ in out]
    return out


PRE_TOKENIZERS = [
    (pre.ByteLevel(False, True), hf_pre.ByteLevel(add_prefix_space=False, use_regex=True)),
    (pre.ByteLevel(True, True), hf_pre.ByteLevel(add_prefix_space=True, use_regex=True)),
    (pre.ByteLevel(False, False), hf_pre.ByteLevel(add_prefix_space=False, use_regex=False)),
    (pre.Metaspace("▁", "always", True), hf_pre.Metaspace(replacement="▁", prepend_scheme="always", split=True)),
    (pre.Metaspace("▁", "never", False), hf_pre.Metaspace(replacement="▁", prepend_scheme="never", split=False)),
    (pre.Metaspace("▁", "first", True), hf_pre.Metaspace(replacement="▁", prepend_scheme="first", split=True)),
    (pre.Whitespace(), hf_pre.Whitespace()),
    (pre.WhitespaceSplit(), hf_pre.WhitespaceSplit()),
    (pre.Punctuation(), hf_pre.Punctuation()),
    (pre.Punctuation("Removed"), hf_pre.Punctuation(behavior="removed")),
    (pre.Punctuation("MergedWithNext"), hf_pre.Punctuation(behavior="merged_with_next")),
    (pre.Digits(False), hf_pre.Digits(individual_digits=False)),
    (pre.Digits(True), hf_pre.Digits(individual_digits=True)),
    *[(pre.Split(HFPattern(string="-"), b, inv), hf_pre.Split("-", behavior=hb, invert=inv))
      for b, hb in [("Removed", "removed"), ("Isolated", "isolated"), ("MergedWithPrevious", "merged_with_previous"),
                    ("MergedWithNext", "merged_with_next"), ("Contiguous", "contiguous")] for inv in (False, True)],
    (pre.Split(HFPattern(regex_source=r"\p{N}{1,3}"), "Isolated"),
     hf_pre.Split(__import__("tokenizers").Regex(r"\p{N}{1,3}"), behavior="isolated")),
    (pre.PreTokenizerSequence([pre.WhitespaceSplit(), pre.Digits(True)]),
     hf_pre.Sequence([hf_pre.WhitespaceSplit(), hf_pre.Digits(individual_digits=True)])),
]  # fmt: skip


@pytest.mark.parametrize(("ours", "ref"), PRE_TOKENIZERS, ids=[f"{type(o).__name__}{i}" for i, (o, _) in
                                                               enumerate(PRE_TOKENIZERS)])
def test_pre_tokenizers_match_hf(ours: pre.PreTokenizer, ref: object) -> None:
    for text in [*TEXTS, "the-final--countdown", "-lead", "trail-", "--"]:
        expected = [(t, tuple(o)) for t, o in ref.pre_tokenize_str(text)]  # type: ignore[attr-defined]
        got = _pieces(ours, text)
        assert [t for t, _ in got] == [t for t, _ in expected], repr(text)
        if not isinstance(ours, pre.ByteLevel):  # HF reports ByteLevel offsets in bytes of the normalized text
            assert [o for _, o in got] == [o for _, o in expected], repr(text)


TOKEN_LISTS = [
    ["▁Hello", "▁world", "!"], ["<0xE2>", "<0x82>", "<0xAC>", "▁euro"], ["<0xE2>", "<0x82>", "x"], ["<0xFF>"],
    ["ĠHello", "Ġworld", "Ċ"], ["Ã©", "t", "Ã"], ["hello</w>", "world</w>"], ["  spaced  ", " x"], [],
    ["<0x+A>", "<0xzz>", "<0x41>"], ["▁▁", "▁a▁b"],
]  # fmt: skip

DECODERS = [
    (dec.ByteLevelDecoder(), hf_dec.ByteLevel()),
    (dec.MetaspaceDecoder("▁", "always"), hf_dec.Metaspace(replacement="▁", prepend_scheme="always")),
    (dec.MetaspaceDecoder("▁", "never"), hf_dec.Metaspace(replacement="▁", prepend_scheme="never")),
    (dec.DecoderSequence([dec.ReplaceDecoder(HFPattern(string="▁"), " "), dec.ByteFallback(), dec.Fuse(),
                          dec.StripDecoder(" ", 1, 0)]),
     hf_dec.Sequence([hf_dec.Replace("▁", " "), hf_dec.ByteFallback(), hf_dec.Fuse(), hf_dec.Strip(" ", 1, 0)])),
    (dec.ByteFallback(), hf_dec.ByteFallback()),
    (dec.StripDecoder(" ", 2, 2), hf_dec.Strip(" ", 2, 2)),
    (dec.BPEDecoder("</w>"), hf_dec.BPEDecoder(suffix="</w>")),
    (dec.Fuse(), hf_dec.Fuse()),
]  # fmt: skip


@pytest.mark.parametrize(("ours", "ref"), DECODERS, ids=[f"{type(o).__name__}{i}" for i, (o, _) in
                                                         enumerate(DECODERS)])
def test_decoders_match_hf(ours: dec.Decoder, ref: object) -> None:
    for tokens in TOKEN_LISTS:
        assert "".join(ours.decode_chain(list(tokens))) == ref.decode(tokens), tokens  # type: ignore[attr-defined]


def test_surfaces() -> None:
    assert dec.ByteLevelDecoder().surface("Ġhi") == b" hi"
    assert dec.ByteLevelDecoder().surface("｜x") == "｜x".encode()  # outside the byte table: its own UTF-8
    assert dec.ByteFallback().surface("<0xE2>") == b"\xe2"
    assert dec.MetaspaceDecoder().surface("▁a▁b") == " a b"
    seq = dec.DecoderSequence([dec.ReplaceDecoder(HFPattern(string="▁"), " "), dec.ByteFallback(), dec.Fuse()])
    assert seq.surface("<0x0A>") == b"\n" and seq.surface("▁the") == " the"
