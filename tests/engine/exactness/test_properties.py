"""(c) Hypothesis property tests: our ids equal tiktoken's on generated text, full Unicode and biased to tricky
classes. Fixed example counts, derandomized, no example database: the same examples run on every CI run."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from .reference import compare, reference_encoding
from .strategies import any_text, valid_text

EXAMPLES = 400

stable = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


def _check(tokenizer: str, backend: str, text: str, source: str) -> None:
    bad = compare(tokenizer, [text], source=source, backend=backend)
    assert not bad, bad[0].describe()


@stable
@given(text=valid_text(80))
def test_valid_text_equals_tiktoken(tokenizer: str, backend: str, text: str) -> None:
    _check(tokenizer, backend, text, "hypothesis")


@stable
@given(text=any_text(60))
def test_text_with_surrogates_equals_tiktoken(tokenizer: str, backend: str, text: str) -> None:
    _check(tokenizer, backend, text, "hypothesis_surrogates")


@stable
@given(text=valid_text(40))
def test_count_equals_tiktoken_length(tokenizer: str, backend: str, text: str) -> None:
    from .reference import ours

    assert ours(tokenizer, backend).count(text) == len(reference_encoding(tokenizer).encode_ordinary(text))
