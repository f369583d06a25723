"""Post-processors against Hugging Face on a small byte-level tokenizer: the single template's ids and the
offsets after ``trim_offsets`` (Roberta, ByteLevel), with and without ``add_prefix_space``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from app.engine.pipeline.hf_json import from_hf_json

TEXT = ["the quick brown fox", "  spaced   out  ", "naïve café\nnew line", "tabs\tand 123 digits"] * 10


def _base(add_prefix_space: bool) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "[CLS]", "[SEP]"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


PROCESSORS: list[tuple[str, Any]] = [
    ("roberta-trim", lambda t: processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                            ("<s>", t.token_to_id("<s>")), trim_offsets=True,
                                                            add_prefix_space=True)),
    ("roberta-notrim", lambda t: processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                              ("<s>", t.token_to_id("<s>")), trim_offsets=False)),
    ("bert", lambda t: processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))),
    ("bytelevel-trim", lambda t: processors.ByteLevel(trim_offsets=True)),
    ("template", lambda t: processors.TemplateProcessing(single="[CLS] $A [SEP] </s>", special_tokens=[
        ("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]")), ("</s>", t.token_to_id("</s>"))])),
]  # fmt: skip


@pytest.mark.parametrize("add_prefix_space", [False, True])
@pytest.mark.parametrize(("label", "make"), PROCESSORS, ids=[p[0] for p in PROCESSORS])
def test_processor_matches_hf(label: str, make: Any, add_prefix_space: bool) -> None:
    ref = _base(add_prefix_space)
    ref.post_processor = make(ref)
    ref.encode_special_tokens = True
    ours = from_hf_json(ref.to_str(), label, backend="python")
    doc = json.loads(ref.to_str())
    assert doc["post_processor"]["type"] in ("RobertaProcessing", "BertProcessing", "ByteLevel", "TemplateProcessing")
    for text in [*TEXT[:4], " lead", "trail ", "  both  ", "x", "a  b", "<s> in text"]:
        plain = ref.encode(text, add_special_tokens=False)
        assert ours.encode(text) == plain.ids, text
        full = ref.encode(text, add_special_tokens=True)
        assert ours.encode(text, add_special_tokens=True) == full.ids, text
        ids, spans = ours.encode_with_offsets(text)
        assert spans == [tuple(o) for o in plain.offsets], (label, text)
