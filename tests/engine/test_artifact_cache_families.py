"""The rank families through the compiled artifact cache: every bundled tiktoken, tekken, byte-level
``tokenizer.json`` and byte-level GGUF tokenizer gives the same ids loaded without the cache, into an empty one (cold)
and from a filled one (warm); damaged files are rebuilt; the settings and the registry pass the directory down."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest

from app.core.config import Settings
from app.engine import defaults, registry
from app.engine.artifact_cache import ArtifactCache
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.pipeline.models.byte_level_rank import ByteLevelRankBPE
from app.engine.store import Store
from tests.engine.exactness import corpus

#: Bundled tokenizers whose loads use a rank part, and the part.
RANK_FAMILY = {
    "gpt2": "tiktoken-ranks", "cl100k_base": "tiktoken-ranks", "o200k_base": "tiktoken-ranks",
    "o200k_harmony": "tiktoken-ranks", "llama3": "tiktoken-ranks", "p50k_base": "tiktoken-ranks",
    "p50k_edit": "tiktoken-ranks", "mistral-nemo": "tekken-ranks", "qwen3": "byte-level-ranks",
    "deepseek-v3": "byte-level-ranks", "qwen2": "byte-level-ranks",
}  # fmt: skip


def _texts() -> list[str]:
    texts = list(itertools.islice(corpus.pairs(), 0, None, 97))
    texts += list(itertools.islice(corpus.glued_triples(), 0, None, 7))
    texts += list(corpus.random_mixes(29, 600))
    texts += list(corpus.surrogate_strings())
    texts += list(corpus.long_runs(3000).values())
    texts += ["<|endoftext|> <|im_start|>user\nhi<|im_end|>", "[INST] x [/INST]", "", " ", "\n\n\n"]
    return texts


TEXTS = _texts()


@pytest.mark.parametrize("name", sorted(RANK_FAMILY))
def test_cached_loads_give_the_same_ids(name: str, tmp_path: Path) -> None:
    spec = Store.load().spec(name)
    plain = load_tokenizer(spec, LoadOptions(artifact_cache=None))
    cold_cache = ArtifactCache(tmp_path)
    cold = load_tokenizer(spec, LoadOptions(artifact_cache=cold_cache))
    assert cold_cache.misses >= 1 and cold_cache.hits == 0
    assert cold_cache.path(spec.sha256, RANK_FAMILY[name]) in cold_cache.files()
    warm_cache = ArtifactCache(tmp_path)
    warm = load_tokenizer(spec, LoadOptions(artifact_cache=warm_cache))
    assert warm_cache.misses == warm_cache.rebuilt == 0 and warm_cache.hits == cold_cache.misses
    assert plain.n_vocab == cold.n_vocab == warm.n_vocab
    if RANK_FAMILY[name] == "byte-level-ranks":  # the fast path is what the cache restores
        assert isinstance(warm.model, ByteLevelRankBPE)  # type: ignore[attr-defined]
    expected = plain.encode_batch(TEXTS)
    assert cold.encode_batch(TEXTS) == expected
    assert warm.encode_batch(TEXTS) == expected
    assert [warm.encode(t) for t in TEXTS[::5]] == expected[::5]
    assert [warm.count(t) for t in TEXTS[::5]] == [len(ids) for ids in expected[::5]]
    ids = [i for ids in expected[:200] for i in ids]
    assert warm.decode_tokens_bytes(ids) == plain.decode_tokens_bytes(ids)


def test_damaged_rank_file_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    spec = Store.load().spec("gpt2")
    load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path)))
    path = ArtifactCache(tmp_path).path(spec.sha256, "tiktoken-ranks")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    cache = ArtifactCache(tmp_path)
    tok = load_tokenizer(spec, LoadOptions(artifact_cache=cache))
    assert cache.rebuilt == 1 and cache.hits == 0
    assert tok.encode("hello world, héllo") == load_tokenizer(spec).encode("hello world, héllo")
    assert ArtifactCache(tmp_path).get(spec.sha256, "tiktoken-ranks") is not None


def test_a_file_that_is_not_rank_bpe_caches_the_refusal(tmp_path: Path) -> None:
    """gemma3 (byte-fallback BPE) is not byte-level rank BPE: the refusal is cached and the warm load agrees."""
    spec = Store.load().spec("gemma3")
    cache = ArtifactCache(tmp_path)
    cold = load_tokenizer(spec, LoadOptions(artifact_cache=cache))
    got = cache.get(spec.sha256, "byte-level-ranks")
    assert got is not None and got.meta["rank_ordered"] is False and not got.sections
    warm = load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path)))
    assert not isinstance(warm.model, ByteLevelRankBPE)  # type: ignore[attr-defined]
    text = "Hello world — 你好 🙂 <start_of_turn>"
    assert warm.encode(text) == cold.encode(text) == load_tokenizer(spec).encode(text)


def test_artifact_cache_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert defaults.resolve_artifact_cache(None) == tmp_path / "xdg" / "tokenizer-service" / "compiled"
    assert defaults.resolve_artifact_cache("") == tmp_path / "xdg" / "tokenizer-service" / "compiled"
    assert defaults.resolve_artifact_cache("OFF") is None
    assert defaults.resolve_artifact_cache(str(tmp_path / "c")) == tmp_path / "c"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert defaults.resolve_artifact_cache(None) == tmp_path / "home" / ".cache" / "tokenizer-service" / "compiled"
    assert Settings.from_env({"TOKENIZER_ARTIFACT_CACHE": "off"}).artifact_cache_dir() is None
    assert Settings.from_env({"TOKENIZER_ARTIFACT_CACHE": str(tmp_path)}).artifact_cache_dir() == tmp_path
    monkeypatch.setenv("TOKENIZER_ARTIFACT_CACHE", "off")
    assert defaults.artifact_cache_dir() is None and registry.open_artifact_cache() is None


def test_suite_does_not_use_the_home_cache() -> None:
    directory = defaults.artifact_cache_dir()
    assert directory is not None and directory.is_relative_to(Path(tempfile.gettempdir()))
    assert os.environ["XDG_CACHE_HOME"] in str(directory)  # tests that clear the variable fall back there


def test_registry_passes_the_cache_down(tmp_path: Path) -> None:
    registry.reset()
    try:
        registry.load_all(names=["gpt2", "mistral-nemo"], artifact_cache=tmp_path / "c")
        cache = registry.open_artifact_cache(tmp_path / "c")
        # tiktoken-ranks, tekken-ranks, and the witness of mistral-nemo's compressed file (not counted)
        assert cache is not None and cache.misses == 2 and len(cache.files()) == 3
        registry.reset()
        registry.load_all(names=["gpt2", "qwen3"], artifact_cache="off")
        assert len(list((tmp_path / "c").iterdir())) == 3
    finally:
        registry.reset()


def test_service_loads_through_the_configured_cache(tmp_path: Path) -> None:
    from app.api.deps import ServiceState

    registry.reset()
    try:
        settings = Settings.from_env({"TOKENIZER_ARTIFACT_CACHE": str(tmp_path / "svc"),
                                      "TOKENIZER_TOKENIZERS": "gpt2,qwen3"})
        state = ServiceState.load(settings)
        assert set(state.tokenizers) == {"gpt2", "qwen3"}
        parts = {p.name.split(".")[1] for p in (tmp_path / "svc").iterdir()}
        assert {"byte-level-ranks", "tiktoken-ranks"} <= parts
    finally:
        registry.reset()


def test_fast_path_reference_bpe_builds_its_compiled_model_only_when_used() -> None:
    """qwen3 runs on the rank core: its merge-list BPE (the reference for vocabulary, offsets and dropout) builds
    its own compiled model on first use only, and then agrees with the core."""
    from app.engine.pipeline.byte_level_ranks import byte_to_char
    from app.engine.pipeline.models.bpe import BPE

    tok = load_tokenizer(Store.load().spec("qwen3"), LoadOptions(backend="native"))
    model = tok.model  # type: ignore[attr-defined]
    assert isinstance(model, ByteLevelRankBPE) and isinstance(model.reference, BPE)
    assert model.reference.backend == "native" and not model.reference.native_built
    chars = byte_to_char()
    for piece in ["Hello", " world", " déjà", "1234", "\n\n", " 🙂"]:
        mapped = "".join(chars[b] for b in piece.encode("utf-8"))
        assert model.reference.tokenize(mapped) == model.core.encode(piece)
    assert model.reference.native_built and model.reference.native is not None
