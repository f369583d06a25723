"""Unicode normalizers against Hugging Face's on the code points its older tables leave unassigned
(``app/engine/pipeline/_hf_unicode.py``), and qwen3 ids (NFC normalizer) through both backends on them."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import regex
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import normalizers as hf_norm

from app.engine import get_store, get_tokenizer, native
from app.engine.pipeline import Piece, _hf_unicode
from app.engine.pipeline import normalizers as norm

FORMS = ["NFC", "NFD", "NFKC", "NFKD"]
_CLASS = regex.compile(f"[{_hf_unicode.EXCEPTIONS}]")
EXCEPTIONS = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and _CLASS.match(chr(c))]
CONTEXTS = ["{c}", "a{c}", "a{c}\u0301", "\u0301{c}\u0323", "\u0323{c}\u0301", "a\u0323{c}\u0301", "{c}\u0301\u0323",
            "{c}{c}", "e\u0301{c}e\u0301", "\u1100{c}\u1161", "\ufb01{c}\u2460", "\U00011935{c}\U00011930",
            "\U00011935\U00011930{c}\u0301"]
ROOT = Path(__file__).resolve().parents[3]


def check(form: str, texts: list[str]) -> None:
    """Text and spans (one per character) of ours; text equal to Hugging Face's."""
    ours, ref = norm.Unicode(form), getattr(hf_norm, form)()
    for text in texts:
        piece = ours.normalize(Piece.of(text, True))
        assert piece.spans is not None and len(piece.spans) == len(piece.text)
        expected = ref.normalize_str(text)
        assert piece.text == expected, (form, text)
        assert ours.normalize_str(text) == expected, (form, text)


def test_generated_module_is_current() -> None:
    subprocess.run([sys.executable, "scripts/gen_hf_unicode_exceptions.py", "--check"], cwd=ROOT, check=True)


def test_exception_set_is_what_the_generator_found() -> None:
    assert len(EXCEPTIONS) == 171 and "\u07fd" in EXCEPTIONS and "\U00011938" in EXCEPTIONS
    assert "\u0301" not in EXCEPTIONS and "\u08d4" not in EXCEPTIONS


@pytest.mark.parametrize("form", FORMS)
def test_every_exception_in_contexts(form: str) -> None:
    check(form, [ctx.replace("{c}", c) for c in EXCEPTIONS for ctx in CONTEXTS])


@pytest.mark.parametrize("form", FORMS)
def test_random_mixes_of_exceptions_and_marks(form: str) -> None:
    rng = random.Random(20261201)
    alphabet = [*EXCEPTIONS, *"ae\u0301\u0323\u0300\u0327\u0345\u1100\u1161\uac00\ufb01\u2460 ",
                "\U00011935", "\U00011930", "\u0915", "\u093c"]
    check(form, ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10))) for _ in range(3000)])


@pytest.mark.parametrize("form", FORMS)
def test_code_point_sweep(form: str) -> None:
    """Every scalar value in the contexts; the suite takes every 17th, ``HF_UNICODE_SWEEP_FULL=1`` all."""
    stride = 1 if os.environ.get("HF_UNICODE_SWEEP_FULL") else 17
    ours, ref = norm.Unicode(form), getattr(hf_norm, form)()
    scalars = [c for c in range(0, 0x110000, stride) if not 0xD800 <= c <= 0xDFFF]
    for ctx in CONTEXTS[:7]:
        texts = [ctx.replace("{c}", chr(c)) for c in scalars]
        for i in range(0, len(texts), 512):  # batches first, the texts of a differing batch one by one
            batch = "|".join(texts[i:i + 512])
            if ours.normalize_str(batch) != ref.normalize_str(batch):
                check(form, texts[i:i + 512])
        # spans too, on the non-ASCII texts of a sample
        check(form, texts[::97])


@pytest.mark.skipif(not native.available(), reason="compiled core not built")
@pytest.mark.parametrize("backend", ["native", "python"])
def test_qwen3_ids_equal_hugging_face(backend: str) -> None:
    doc = get_store().spec("qwen3").read_artifact()
    hf = HFTokenizer.from_str(doc if isinstance(doc, str) else doc.decode())
    hf.encode_special_tokens = True
    tok = get_tokenizer("qwen3") if backend == "native" else get_tokenizer("qwen3", backend="python")
    if backend == "native":
        assert tok.text_path == "text-encoder"  # type: ignore[attr-defined]  (the compiled byte-level model)
    rng = random.Random(7)
    texts = ["<think>\u07fd\u0301\u07fd", "x\u0301\u0323\u07fdy", "\U00011935\U00011930 o"]
    texts += [ctx.replace("{c}", c) for c in EXCEPTIONS for ctx in CONTEXTS[:7]]
    texts += ["".join(rng.choice([*EXCEPTIONS, "a", "e\u0301", "\u0323", " ", "<|im_start|>", "日"])
                      for _ in range(rng.randint(1, 40))) for _ in range(500)]
    texts.append("".join(texts) * 2)  # longer than the fast path's NFC windows
    for text in texts:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids, repr(text)
