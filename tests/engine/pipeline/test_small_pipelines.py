"""Small pipelines trained here with Hugging Face ``tokenizers`` (SentencePiece-style BPE with Metaspace and byte
fallback, WordLevel, affixed BPE), compared with HF on texts that stress their options: ids, offsets, decoding."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import tokenizers
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers

from app.engine.pipeline.hf_json import from_hf_json

CORPUS = ["the quick brown fox jumps", "Crème brûlée ﬁne", "ΣΑΣ σας 123 4567", "日本語 テキスト", "don't stop"] * 20
TEXTS = ["the fox", " leading space", "trailing  ", "<x>the fox<x>", "a<x>b", " <x> spaced", "ΣΑΣ ﬁne 98765",
         "unknown ☃ 😀 chars", "", "  ", "日本語<x>", "<y>the", "the<y>", "don't"]


def _metaspace(scheme: str) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme=scheme),
                                     decoders.ByteFallback(), decoders.Fuse()])
    alphabet = [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", *alphabet]))
    tok.add_tokens([AddedToken("<x>", normalized=False), AddedToken("<y>", single_word=True, lstrip=True,
                                                                     rstrip=True, normalized=True)])
    return tok


def _wordlevel() -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(True)])
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    tok.add_special_tokens(["<x>"])
    return tok


def _affixed() -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                                          end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"],
                                                        continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    return tok


CASES: list[tuple[str, Callable[[], tokenizers.Tokenizer]]] = [
    ("metaspace-always", lambda: _metaspace("always")), ("metaspace-first", lambda: _metaspace("first")),
    ("metaspace-never", lambda: _metaspace("never")), ("wordlevel", _wordlevel), ("bpe-affixes", _affixed),
]


@pytest.mark.parametrize(("label", "build"), CASES, ids=[c[0] for c in CASES])
def test_small_pipeline_matches_hf(label: str, build: Callable[[], tokenizers.Tokenizer]) -> None:
    ref = build()
    ref.encode_special_tokens = True
    ours = from_hf_json(ref.to_str(), label, backend="python")
    for text in TEXTS:
        expected = ref.encode(text, add_special_tokens=False)
        assert ours.encode(text) == expected.ids, (label, text)
        ids, spans = ours.encode_with_offsets(text)
        assert spans == [tuple(o) for o in expected.offsets], (label, text)
        for skip in (False, True):
            assert ours.decode(expected.ids, skip_special=skip) == ref.decode(expected.ids, skip_special_tokens=skip)
