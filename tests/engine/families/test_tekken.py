"""mistral-nemo (tekken) against ``mistral-common``'s ``Tekkenizer`` on the same file, on both backends."""

from __future__ import annotations

import pytest
import regex

from app.engine import get_tokenizer, patterns
from app.engine.errors import ArtifactError
from app.engine.tekken import DEFAULT_SPECIALS, parse_tekken
from harness.texts import sample

from .references import artifact_bytes, tekken_reference


@pytest.mark.parametrize("backend", ["native", "python"])
def test_ids_and_decode_equal_mistral_common(backend: str) -> None:
    ref, tok = tekken_reference("mistral-nemo"), get_tokenizer("mistral-nemo", backend=backend)
    texts = sample(60, 150, seed=5)
    wrong = [t for t in texts if tok.encode(t) != ref.encode(t, bos=False, eos=False)]
    assert not wrong, f"{len(wrong)}/{len(texts)} differ; first {wrong[0][:80]!r}"
    for t in texts:
        ids = ref.encode(t, bos=False, eos=False)
        assert tok.decode(ids) == ref.decode(ids)
        assert tok.count(t) == len(ids)


def test_native_backend_splits_with_the_compiled_tekken_scanner() -> None:
    """The file's pattern is :data:`app.engine.patterns.TEKKEN`, so the compiled core splits it (not ``regex``)."""
    from app.engine import native

    if not native.available():
        pytest.skip("no compiled core")
    tok = get_tokenizer("mistral-nemo", backend="native")
    assert tok.pattern == patterns.TEKKEN
    assert tok._native.scanner == native.scanner_id(patterns.TEKKEN) != 0
    text = "I'M don't 12345 ab'CD ¿Qué? x\n\n  y"
    assert tok._native.split(text) == regex.findall(patterns.TEKKEN, text)


def test_special_tokens_take_the_first_ids() -> None:
    tok, ref = get_tokenizer("mistral-nemo"), tekken_reference("mistral-nemo")
    assert tok.n_vocab == ref.n_words == 131072
    assert [tok.special_token_id(n) for n in DEFAULT_SPECIALS] == list(range(20))
    assert tok.special_token_id("<SPECIAL_999>") == 999
    assert tok.encode("[INST]<s>") == ref.encode("[INST]<s>", bos=False, eos=False)
    assert not any(tok.is_special(i) for i in tok.encode("[INST]<s>"))
    assert tok.encode("hi", add_special_tokens=True) == ref.encode("hi", bos=True, eos=False)


def test_malformed_tekken_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="not a tekken tokenizer file"):
        parse_tekken(b'{"config": {}}', "x.json")
    with pytest.raises(ArtifactError):
        parse_tekken(b"not json", "x.json")
    pattern, ranks, specials = parse_tekken(artifact_bytes("mistral-nemo"), "nemo")
    assert len(ranks) == 131072 - 1000 and len(specials) == 1000 and min(ranks.values()) == 1000
