"""Each bundled tokenizer's reference implementation, by name: what exactness and round-trip tests compare with.

tiktoken-format tokenizers are lossless (decode(encode(t)) == t, lone surrogates aside); pipelines may rewrite
text on the way in (NFC, NFKC, ``▁``, BERT's lowercasing and accent stripping), so their expected round trip is the
reference library's own: Hugging Face ``tokenizers`` for ``tokenizer.json``, ``sentencepiece``/``mistral-common``/
Hugging Face for the SentencePiece, tekken and GGUF files (tests/engine/families).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from app.engine import get_store, get_tokenizer

Encode = Callable[[str], list[int]]
Decode = Callable[[list[int]], str]


@cache
def family_reference(name: str) -> tuple[Encode, Decode]:
    """The reference's encode (no special tokens added) and decode for the pipeline tokenizer ``name``."""
    if get_store().spec(name).format == "hf_json":
        from tests.engine.pipeline.reference import reference

        ref = reference(name)
        return (lambda t: ref.encode(t, add_special_tokens=False).ids), ref.decode
    from tests.engine.families.exactness import _reference

    return _reference(name)


def expected_round_trip(name: str, text: str) -> str:
    """What decode(encode(text)) must give for ``name``: the text itself for tiktoken-format tokenizers (lone
    surrogates as U+FFFD), the reference's round trip for pipelines."""
    clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    if get_store().spec(name).format in ("tiktoken", "tekken"):
        return clean
    encode, decode = family_reference(name)
    whole = decode(encode(clean))
    for unk_name in (n for n in get_tokenizer(name).special_tokens if "unk" in n.lower()):
        if 0 < whole.count(unk_name) < clean.count(unk_name):
            # The reference read the unknown token's name in the text as that token and fused neighbouring unknowns
            # (XLM-R's Unigram vocabulary holds "<unk>" as a piece); ours keeps the name as text, so each side of it
            # round-trips through the reference alone.
            return unk_name.join(decode(encode(part)) if part else "" for part in clean.split(unk_name))
    return whole
