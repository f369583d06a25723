"""The pipeline families' derivations in the artifact cache (:mod:`app.engine.pipeline.derived`): a tokenizer
loaded without a cache, with a cold one and with a warm one gives the same ids on hostile and sampled text; a
damaged part is rebuilt; the stored forms round-trip exactly."""

from __future__ import annotations

import functools
import itertools
import json
import math
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.engine import native
from app.engine.artifact_cache import ArtifactCache, Compiled, u32_bytes
from app.engine.artifacts import XZ_WITNESS_PART
from app.engine.loaders import LoadOptions, load_tokenizer
from app.engine.pipeline.charsmap import CharsMap, load_charsmap
from app.engine.pipeline.derived import Derive, LazyMerges, LazyVocab, pack_strings, read_array, unpack_strings
from app.engine.pipeline.gguf_kv import dump_kv, read_kv, restore_kv
from app.engine.pipeline.hf_doc import dump_doc, restore_doc
from app.engine.pipeline.models.bpe import BPE, BPEError
from app.engine.store import Store
from app.engine.tokenizer import Tokenizer
from tests.engine.exactness.corpus import surrogate_strings
from tests.engine.pipeline.corpus import hostile, long_strings

#: Every bundled tokenizer whose loader goes through this package's derivations, with the parts of this package a
#: cold load writes (the rank families' parts, such as a declined ``byte-level-ranks``, may be there too), and the
#: witness of a compressed artifact's verification where the loader verifies through the cache (GGUF and
#: ``tokenizer.json``: tests/engine/test_artifacts.py).
FAMILIES = {
    "xlm-roberta": {"gguf-kv", "charsmap", "metaspace-risk", "unigram-model", XZ_WITNESS_PART},
    "xlm-roberta-sentencepiece": {"gguf-kv", "charsmap", "unigram-model", XZ_WITNESS_PART},
    "gemma3": {"hf-doc", "merge-model", XZ_WITNESS_PART},
    "llama2": {"gguf-kv", "sp-bpe-model", XZ_WITNESS_PART},
    "phi-3": {"gguf-kv", "sp-bpe-model", XZ_WITNESS_PART},
    "bge-small-en-v1.5": {"gguf-kv", XZ_WITNESS_PART},
    "mistral-v1": {"sp-vocab", "sp-bpe-model", XZ_WITNESS_PART},
    "mistral-v3": {"sp-vocab", "sp-bpe-model", XZ_WITNESS_PART},
    "mistral-v7": {"sp-vocab", "sp-bpe-model", XZ_WITNESS_PART},
}
STORE = Store.load()


@functools.cache
def _plain(name: str) -> Tokenizer:
    """The tokenizer ``name`` loaded without a cache (once per module run)."""
    return load_tokenizer(STORE.spec(name))


def _texts(tok: Tokenizer) -> list[str]:
    specials = sorted(tok.special_tokens)
    return [*hostile(specials, seed=29, count=300, token_limit=40), *itertools.islice(surrogate_strings(), 200),
            *long_strings(3000)]


def _parts(directory: Path) -> set[str]:
    """The parts of the cache files in ``directory`` (``unigram-model-<digest of its inputs>`` as ``unigram-model``)."""
    return {_family(p.name.split(".")[1]) for p in directory.glob("*.tkc")}


def _family(part: str) -> str:
    return "unigram-model" if part.startswith("unigram-model-") else part


def _stored_part(directory: Path, sha256: str, prefix: str) -> str:
    """The one part of the artifact ``sha256`` in ``directory`` whose name starts with ``prefix``."""
    (found,) = [p.name.split(".")[1] for p in directory.glob(f"{sha256}.{prefix}*.tkc")]
    return found


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def loaded(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[Tokenizer]]:
    """(name, cache directory, [no cache, cold cache, warm cache]) for one tokenizer."""
    name = request.param
    spec = STORE.spec(name)
    directory = tmp_path_factory.mktemp(f"acache-{name}")
    plain = _plain(name)
    cold_cache = ArtifactCache(directory)
    cold = load_tokenizer(spec, LoadOptions(artifact_cache=cold_cache))
    assert cold_cache.hits == 0 and cold_cache.misses >= len(FAMILIES[name] - {XZ_WITNESS_PART})  # (not counted)
    warm_cache = ArtifactCache(directory)
    warm = load_tokenizer(spec, LoadOptions(artifact_cache=warm_cache))
    assert warm_cache.misses == 0 and warm_cache.hits == cold_cache.misses
    return name, directory, [plain, cold, warm]


def test_parts_written(loaded: tuple[str, Path, list[Tokenizer]]) -> None:
    name, directory, _ = loaded
    assert _parts(directory) - {"byte-level-ranks"} == FAMILIES[name]


def test_same_ids_without_cold_and_warm(loaded: tuple[str, Path, list[Tokenizer]]) -> None:
    name, _, (plain, cold, warm) = loaded
    texts = _texts(plain)
    assert len(texts) > 500
    for text in texts:
        want = plain.encode(text)
        assert cold.encode(text) == want, (name, text)
        assert warm.encode(text) == want, (name, text)
    for text in texts[:200]:
        want = plain.encode(text, add_special_tokens=True)
        assert warm.encode(text, add_special_tokens=True) == want, (name, text)
        assert warm.encode_with_offsets(text) == plain.encode_with_offsets(text), (name, text)
    assert warm.n_vocab == plain.n_vocab
    assert warm.special_tokens == plain.special_tokens


def test_python_backend_same_ids_from_warm_cache(tmp_path: Path) -> None:
    """The reference (Python) path of a warm-cache tokenizer reads the lazily unpacked charsmap table."""
    spec = STORE.spec("xlm-roberta")
    load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path), backend="python"))
    warm = load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path), backend="python"))
    plain = load_tokenizer(spec, LoadOptions(backend="python"))
    for text in ["ﬁ ① Ｈｅｌｌｏ ㈱ 가", "e\u0301 \r\n x", "日本語  テキスト", "\u3131\u314f"]:
        assert warm.encode(text) == plain.encode(text)


@pytest.mark.parametrize(("name", "part"), [("xlm-roberta", "charsmap"), ("xlm-roberta", "metaspace-risk"),
                                            ("xlm-roberta", "gguf-kv"), ("gemma3", "hf-doc"),
                                            ("gemma3", "merge-model"), ("gemma3", "merge-model-tables"),
                                            ("xlm-roberta", "unigram-model"),
                                            ("xlm-roberta", "unigram-model-tables"),
                                            ("xlm-roberta-sentencepiece", "unigram-model-ids"),
                                            ("mistral-v1", "sp-vocab"), ("mistral-v1", "sp-bpe-model"),
                                            ("llama2", "sp-bpe-model"), ("llama2", "sp-bpe-model-tables"),
                                            ("phi-3", "sp-bpe-model-refused")])
def test_inconsistent_part_is_rebuilt(tmp_path: Path, name: str, part: str) -> None:
    """A verified file whose content does not fit (a wrong meta value) is refused by the part's restore, deleted
    and rebuilt; the ids stay those of a load without a cache."""
    spec = STORE.spec(name)
    load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path)))
    cache = ArtifactCache(tmp_path)
    tables = part.endswith("-tables")  # the compiled model's tables damaged (Model.load refuses them)
    ids = part == "unigram-model-ids"  # a stored score id beyond the vocabulary
    refused = part.endswith("-refused")  # a stored refusal made for other settings
    part = part.removesuffix("-tables").removesuffix("-ids").removesuffix("-refused")
    if part == "unigram-model":
        part = _stored_part(tmp_path, spec.sha256, "unigram-model-")
    stored = cache.get(spec.sha256, part)
    assert stored is not None
    meta = json.loads(json.dumps(stored.meta))
    sections = {k: bytes(v) for k, v in stored.sections.items()}
    if part == "charsmap":
        meta["size"] += 1
    elif part == "metaspace-risk":
        meta["blob_sha256"] = "0" * 64
    elif part == "gguf-kv":
        first = next(iter(meta["sections"]))
        meta["sections"][first][1] += 1
    elif part == "hf-doc":
        meta["vocab"] += 1
    elif refused:
        meta["refused"], meta["byte_fallback"] = True, not meta["byte_fallback"]
        sections = {}
    elif tables and part in ("merge-model", "sp-bpe-model"):
        sections["model"] = sections["model"][:1000] + b"\xff" + sections["model"][1001:]
    elif tables:  # a child index of the trie's root beyond the array
        model = bytearray(sections["model"])
        model[72 + 1024:72 + 1028] = (1 << 30).to_bytes(4, "little")
        sections["model"] = bytes(model)
    elif ids:
        sections["ids"] = sections["ids"][:-4] + (1 << 31).to_bytes(4, "little")
    elif part.startswith("unigram-model-") or part in ("sp-vocab", "sp-bpe-model"):
        meta["n"] += 1
    else:
        meta["merges"] += 1
    cache.put(spec.sha256, part, Compiled(meta, sections))
    fresh = ArtifactCache(tmp_path)
    tok = load_tokenizer(spec, LoadOptions(artifact_cache=fresh))
    assert fresh.rebuilt == 1
    again = ArtifactCache(tmp_path)
    load_tokenizer(spec, LoadOptions(artifact_cache=again))
    assert again.rebuilt == 0 and again.misses == 0
    plain = _plain(name)
    for text in ["Hello  world ﬁ①", "日本語のテキスト。", "<s> x </s>", "e\u0301\u0301 \r\n\t"]:
        assert tok.encode(text) == plain.encode(text)


def test_truncated_file_is_rebuilt(tmp_path: Path) -> None:
    spec = STORE.spec("xlm-roberta-sentencepiece")
    load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(tmp_path)))
    (path,) = tmp_path.glob("*.charsmap.*")
    path.write_bytes(path.read_bytes()[:-100])
    cache = ArtifactCache(tmp_path)
    tok = load_tokenizer(spec, LoadOptions(artifact_cache=cache))
    assert cache.rebuilt == 1 and cache.hits == 2  # (gguf-kv and unigram-model restored)
    assert tok.encode("ﬁ ① Ｈｅｌｌｏ") == _plain("xlm-roberta-sentencepiece").encode("ﬁ ① Ｈｅｌｌｏ")


def test_unwritable_cache_loads_the_same(tmp_path: Path) -> None:
    spec = STORE.spec("llama2")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    tok = load_tokenizer(spec, LoadOptions(artifact_cache=ArtifactCache(blocker / "cache")))
    assert tok.encode("Hello world") == _plain("llama2").encode("Hello world")


def test_pack_strings_round_trip() -> None:
    items = ["", "a", "▁x", "\ud800", "日本", " ", "\n"]
    packed = pack_strings(items)
    assert packed is not None
    assert unpack_strings(memoryview(packed), len(items)) == items
    assert unpack_strings(b"", 0) == []
    assert pack_strings(["a\0b"]) is None
    with pytest.raises(ValueError):
        unpack_strings(packed, len(items) + 1)
    with pytest.raises(ValueError):
        read_array(b"\0" * 7, "I", 2)


def test_charsmap_from_cache_equals_decoded(tmp_path: Path) -> None:
    blob = read_kv(STORE.spec("xlm-roberta").read_artifact())["tokenizer.ggml.precompiled_charsmap"]
    derived = Derive(ArtifactCache(tmp_path), "a" * 64)
    built = load_charsmap(blob, derived)
    restored = load_charsmap(blob, derived)
    plain = CharsMap(blob)
    assert "table" not in vars(restored)  # unpacked on first use
    assert len(restored) == len(plain) == len(built)
    assert restored.table == plain.table
    for text in ["ﬁ ① Ｈｅｌｌｏ ㈱", "\u1100\u1161\u11a8 가", "e\u0301"]:
        assert restored.normalize_hf_str(text) == plain.normalize_hf_str(text)
        assert restored.chunks_hf(text) == plain.chunks_hf(text)
        assert restored.longest_at(text, 0) == plain.longest_at(text, 0)


def test_gguf_kv_round_trip() -> None:
    kv = read_kv(STORE.spec("llama2").read_artifact())
    kv["test.mixed"] = [1, 2.5]
    kv["test.empty"] = []
    kv["test.nul"] = ["a\0b", "c"]
    kv["test.bools"] = [True, False]
    kv["test.nan"] = [math.inf, -0.0]
    stored = dump_kv(kv)
    back = restore_kv(Compiled(stored.meta, {k: memoryview(bytes(v)) for k, v in stored.sections.items()}))
    assert list(back) == list(kv)
    for key, value in kv.items():
        assert back[key] == value and type(back[key]) is type(value), key
        if type(value) is list:
            assert [type(v) for v in back[key]] == [type(v) for v in value], key
    assert math.copysign(1.0, back["test.nan"][1]) == -1.0


def test_hf_doc_round_trip() -> None:
    doc = {
        "version": "1.0", "added_tokens": [{"id": 5, "content": "\ud800x", "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"},
        "model": {"type": "BPE", "dropout": None, "vocab": {"a": 0, "b": 1, "ab": 2, "\u2581": 3},
                  "merges": [["a", "b"]], "fuse_unk": False, "score": 1e300},
    }
    back = restore_doc(dump_doc(doc), 10_000, "t.json")
    assert back["model"]["merges"] == [("a", "b")]
    back["model"]["merges"] = [list(m) for m in back["model"]["merges"]]
    assert back == doc and list(back["model"]) == list(doc["model"])
    doc["model"]["merges"] = ["a b"]
    assert restore_doc(dump_doc(doc), 10_000, "t.json") == doc
    doc["model"]["vocab"] = {"a": 0.5}  # not plain ids: kept in the JSON part
    assert restore_doc(dump_doc(doc), 10_000, "t.json") == doc
    with pytest.raises(ValueError):  # an id beyond what the file's size allows: a damaged entry
        restore_doc(dump_doc({"model": {"type": "BPE", "vocab": {"a": 10**6}}}), 100, "t.json")


def test_restored_merges_are_checked_at_once_and_split_on_first_use() -> None:
    doc = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4}, "merges": ["a b", "ab c"]}}
    stored = dump_doc(doc)
    back = restore_doc(stored, 10_000, "t.json")
    merges = back["model"]["merges"]
    assert isinstance(merges, LazyMerges) and len(merges) == 2 and merges._items is None  # not split yet
    assert merges == ["a b", "ab c"] and merges[1] == "ab c" and list(merges) == ["a b", "ab c"]
    with pytest.raises(ValueError):  # the count disagrees with the section
        restore_doc(Compiled({**stored.meta, "merges": ["str", 3]}, stored.sections), 10_000, "t.json")
    with pytest.raises(ValueError):  # not UTF-8
        restore_doc(Compiled(stored.meta, {**stored.sections, "merges": b"\xff\0x"}), 10_000, "t.json")
    doc["model"]["merges"] = [["a", "b"], ["ab", "c"]]
    pairs = restore_doc(dump_doc(doc), 10_000, "t.json")["model"]["merges"]
    assert pairs == [("a", "b"), ("ab", "c")] and len(pairs) == 2
    assert dump_doc(back).sections["merges"] == stored.sections["merges"]  # a restored list dumps as before


def _lazy_vocab(vocab: dict[str, int]) -> LazyVocab:
    packed = pack_strings(list(vocab))
    assert packed is not None
    return LazyVocab(packed.decode("utf-8", "surrogatepass"), array("I", vocab.values()), len(vocab))


@pytest.mark.skipif(not native.available(), reason="compiled core not built")
def test_restored_bpe_vocab_is_checked_at_once_and_built_on_first_use() -> None:
    vocab = {"a": 7, "b": 1, "ab": 2, "\ud800": 3, "": 9, "c": 4}
    doc = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]}}
    stored = dump_doc(doc)
    back = restore_doc(stored, 10_000, "t.json")["model"]["vocab"]
    assert isinstance(back, LazyVocab) and (back.min_id, back.max_id) == (1, 9) and not back.built
    assert [back.find(k) for k in [*vocab, "x", "a\0b", "ab\0"]] == [*vocab.values(), None, None, None]
    assert not back.built and back == vocab and back.built and list(back.items()) == list(vocab.items())
    assert dump_doc({"model": {"type": "BPE", "vocab": back}}).sections["vocab_keys"] == stored.sections["vocab_keys"]
    with pytest.raises(ValueError):  # the count disagrees with the sections
        restore_doc(Compiled({**stored.meta, "vocab": 5}, stored.sections), 10_000, "t.json")
    with pytest.raises(ValueError):  # not UTF-8
        restore_doc(Compiled(stored.meta, {**stored.sections, "vocab_keys": b"\xff\0b\0ab\0x\0\0c"}), 10_000,
                    "t.json")
    with pytest.raises(ValueError, match="model.vocab id"):  # beyond what the file's size allows: no dict needed
        restore_doc(dump_doc({"model": {"type": "BPE", "vocab": {"a": 1, "b": 10**6, "c": 2}}}), 100, "t.json")
    with pytest.raises(ValueError, match="repeated tokens"):  # (only a crafted entry holds one)
        restore_doc(Compiled({**stored.meta, "vocab": 3}, {**stored.sections, "vocab_keys": b"a\0b\0a",
                                                             "vocab_ids": u32_bytes([1, 2, 3])}), 10_000, "t.json")


def test_restored_vocab_without_the_core_is_a_checked_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = {"a": 7, "b": 1, "ab": 2}
    stored = dump_doc({"model": {"type": "BPE", "vocab": vocab}})
    monkeypatch.setattr(native, "available", lambda: False)
    back = restore_doc(stored, 10_000, "t.json")["model"]["vocab"]
    assert type(back) is dict and back == vocab
    with pytest.raises(ValueError, match="repeated tokens"):
        restore_doc(Compiled(stored.meta, {**stored.sections, "vocab_keys": b"a\0b\0a"}), 10_000, "t.json")


def test_lazy_vocab_lookups_equal_the_dict() -> None:
    """:meth:`LazyVocab.find` (no dict) and every mapping method (the dict) agree with ``dict(zip(keys, ids))``,
    repeated tokens keeping their last id; threads that race to the first use get one dict."""
    cases = [([], []), ([""], [0]), (["x"], [4]), (["a", "a"], [1, 2]), (["a", "b", "a", "c"], [1, 2, 3, 4]),
             (["b", "a", "c", "a"], [1, 2, 3, 4]), (["", "a", ""], [5, 6, 7]), (["aa", "a", "aaa"], [0, 1, 2])]
    for keys, ids in cases:
        packed = pack_strings(keys)
        assert packed is not None
        expected = dict(zip(keys, ids, strict=True))
        probes = [*keys, "", "a", "aa", "z", "a\0"]
        lazy = LazyVocab(packed.decode(), array("I", ids), len(keys))
        assert [lazy.find(k) for k in probes] == [expected.get(k) for k in probes], keys
        assert (lazy.min_id, lazy.max_id) == ((min(ids), max(ids)) if ids else (0, -1))
        with ThreadPoolExecutor(4) as pool:
            dicts = list(pool.map(lambda _, v=lazy: v.as_dict(), range(8)))
        assert all(d is dicts[0] for d in dicts) and dicts[0] == expected
        assert [lazy.find(k) for k in probes] == [expected.get(k) for k in probes]  # (from the dict now)
        assert lazy == expected and len(lazy) == len(expected) and dict(lazy) == expected
        assert all((k in lazy) == (k in expected) and lazy.get(k) == expected.get(k) for k in probes)
    with pytest.raises(ValueError):
        LazyVocab("a\0b", array("I", [1]), 2)
    with pytest.raises(ValueError):
        LazyVocab("a\0b", array("I", [1, 2]), 3)


@pytest.mark.parametrize("backend", ["native", "python"])
def test_bpe_of_a_lazy_vocab_equals_bpe_of_the_dict(backend: str) -> None:
    """A byte-fallback BPE with an unknown token built from a LazyVocab encodes, decodes and sizes as the dict's,
    and needs no dict to be made (native backend, compiled model built on first use)."""
    vocab = {"<unk>": 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}, "a": 300, "b": 301, "ab": 302, "▁": 303,
             "▁ab": 304}
    merges = ["a b", "▁ ab"]
    config = {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True}
    plain = BPE.from_hf({**config, "vocab": vocab, "merges": merges}, backend=backend)
    lazy_vocab = _lazy_vocab(vocab)
    lazy = BPE.from_hf({**config, "vocab": lazy_vocab, "merges": merges}, backend=backend, lazy_native=True)
    assert (lazy.unk_id, lazy.vocab_size, lazy.backend) == (plain.unk_id, plain.vocab_size, plain.backend) == (
        0, 305, backend)
    if backend == "native":
        assert not lazy_vocab.built  # nothing needed the dict yet (a warm load restores the compiled model)
    for text in ["▁ab", "abab▁xé", "日本", ""]:
        assert lazy.tokenize(text) == plain.tokenize(text), text
    assert [lazy.id_to_token(i) for i in range(306)] == [plain.id_to_token(i) for i in range(306)]
    assert lazy.vocab == plain.vocab and lazy.token_to_id("ab") == 302
    with pytest.raises(BPEError):
        BPE.from_hf({**config, "unk_token": "<missing>", "vocab": _lazy_vocab(vocab), "merges": merges})


# -- Unigram vocabularies as columns, and the compiled model keyed by their origin ----------------------------------

_UNIGRAM_PIECES = ["<unk>", "▁a", "b", "▁ab", "東京", "🙂", "a", *(f"<0x{b:02X}>" for b in range(256))]
_UNIGRAM_SCORES = [0.0, -1.0, -2.0, -1.5, -3.0, -4.0, -2.5, *([-9.0] * 256)]
_UNIGRAM_TEXTS = ["▁ab▁a東京🙂xyz", "bbbb▁a▁a", "", "\U0001f600▁é"]


def test_unigram_vocab_columns_build_the_pair_list_model() -> None:
    """A ``UnigramVocab`` (a derived document's columns) reads as the pair list and builds the model the pair list
    of a ``tokenizer.json`` builds; anything but string pieces and float scores of one length is refused."""
    from app.engine.pipeline.models.unigram import Unigram, UnigramVocab

    pairs = list(zip(_UNIGRAM_PIECES, _UNIGRAM_SCORES, strict=True))
    columns = UnigramVocab(list(_UNIGRAM_PIECES), list(_UNIGRAM_SCORES), origin="test.v1")
    assert columns == pairs and len(columns) == len(pairs) and columns[3] == ("▁ab", -1.5)
    for backend in ("native", "python"):
        config = {"type": "Unigram", "unk_id": 0, "byte_fallback": True}
        expected = Unigram.from_hf({**config, "vocab": [list(p) for p in pairs]}, backend=backend)
        model = Unigram.from_hf({**config, "vocab": columns}, backend=backend)
        assert model.vocab == expected.vocab and model.unk_score == expected.unk_score
        assert model.vocab_size == expected.vocab_size and model.id_to_token(4) == "東京"
        for text in _UNIGRAM_TEXTS:
            assert model.tokenize(text) == expected.tokenize(text)
    for pieces, scores in [(["a"], [1]), (["a", "b"], [1.0]), ([1], [1.0])]:
        with pytest.raises(ValueError):
            UnigramVocab(pieces, scores)  # type: ignore[arg-type]


def test_unigram_model_keyed_by_origin(tmp_path: Path) -> None:
    """With an ``origin`` the stored model is keyed by it and the settings, not by a digest of the pieces: the
    same origin is a hit, another origin or no origin another part; a part whose stored inputs do not match (its
    meta names another origin) is refused, deleted and rebuilt, with the same ids."""
    from app.engine.pipeline.models.unigram import UNIGRAM_MODEL_PART, Unigram

    sha256 = "ab" * 32

    def load(cache: ArtifactCache, origin: str | None) -> Unigram:
        return Unigram((), unk_id=0, byte_fallback=True, float32=True, backend="native",
                       derived=Derive(cache, sha256), columns=(list(_UNIGRAM_PIECES), list(_UNIGRAM_SCORES)),
                       origin=origin)

    plain = Unigram((), unk_id=0, byte_fallback=True, float32=True, backend="native",
                    columns=(list(_UNIGRAM_PIECES), list(_UNIGRAM_SCORES)))
    cold = ArtifactCache(tmp_path)
    for origin in ("test.v1", "test.v2", None):
        load(cold, origin)
    assert cold.misses == 3
    parts = sorted(p.name.split(".")[1] for p in tmp_path.glob("*.tkc"))
    assert len(parts) == 3 and all(p.startswith(UNIGRAM_MODEL_PART + "-") for p in parts)
    warm = ArtifactCache(tmp_path)
    model = load(warm, "test.v1")
    assert warm.hits == 1 and warm.misses == 0
    entries = {p: warm.get(sha256, p) for p in parts}
    (part,) = [p for p, entry in entries.items() if entry is not None and entry.meta.get("origin") == "test.v1"]
    stored = entries[part]
    assert stored is not None
    sections = {k: bytes(v) for k, v in stored.sections.items()}
    warm.put(sha256, part, Compiled({**stored.meta, "origin": "test.v2"}, sections))
    again = ArtifactCache(tmp_path)
    rebuilt = load(again, "test.v1")
    assert again.rebuilt == 1 and again.hits == 0
    for text in _UNIGRAM_TEXTS:
        assert rebuilt.tokenize(text) == model.tokenize(text) == plain.tokenize(text)
