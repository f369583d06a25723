"""A parsed ``tokenizer.json`` document in the artifact cache (part ``"hf-doc"``): a cached load skips the JSON parse.

The bulk of a large file is the model's ``vocab`` (an object of token -> id) and ``merges`` (``"a b"`` strings or
``[a, b]`` pairs); they are stored as packed string sections (:func:`~app.engine.pipeline.derived.pack_strings`)
and a little-endian ``uint32`` id array, the rest of the document as ASCII JSON (lone surrogates escaped, floats
written exactly). The restored document equals the parsed one (same keys in the same order, same values and
forms, except that ``[a, b]`` merge pairs come back as tuples, which every reader of a merge list takes alike), so
every builder sees what it would have seen. A vocabulary or merge list of another shape stays in the
JSON. The ids of the restored document are checked against the artifact's size again (as the parse checks them).

With the compiled core, a ``BPE`` model's vocabulary comes back as a
:class:`~app.engine.pipeline.derived.LazyVocab` (a mapping that builds its dict on first use), checked at once by
:func:`~app.engine.native.check_packed_vocab` (counts, no repeated token, the id range on the id array), and its
merges as a :class:`~app.engine.pipeline.derived.LazyMerges`: a warm load whose compiled model is restored needs
neither. Any other vocabulary is a dict, checked as it is built.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from typing import Any

from .. import native
from ..artifact_cache import Compiled
from ..artifact_limits import check_ids
from ..artifacts import VerifiedArtifact
from ..errors import ArtifactError
from .derived import Derive, LazyMerges, LazyVocab, array_bytes, compiled, pack_strings, read_array, unpack_strings

_MAX_ID = (1 << 32) - 1


def _split_vocab(vocab: Any) -> tuple[bytes, bytes, int] | None:
    """``(keys, ids, count)`` of a token -> id object of plain ids, or None for any other shape."""
    if isinstance(vocab, LazyVocab):
        vocab = vocab.as_dict()
    if not isinstance(vocab, dict) or not all(type(v) is int and 0 <= v <= _MAX_ID for v in vocab.values()):
        return None
    keys = pack_strings(list(vocab))
    if keys is None:
        return None
    return keys, array_bytes(array("I", vocab.values())), len(vocab)


def _split_merges(merges: Any) -> tuple[str, dict[str, bytes], int] | None:
    """``(form, sections, count)`` of a merge list of ``"a b"`` strings (form ``"str"``) or of ``[a, b]`` string
    pairs (form ``"pair"``), or None for any other shape."""
    if isinstance(merges, LazyMerges):
        merges = list(merges)
    if not isinstance(merges, list) or not merges:
        return None
    if all(type(m) is str for m in merges):
        packed = pack_strings(merges)
        return None if packed is None else ("str", {"merges": packed}, len(merges))
    if all(type(m) is list and len(m) == 2 and type(m[0]) is str and type(m[1]) is str for m in merges):
        left, right = pack_strings([m[0] for m in merges]), pack_strings([m[1] for m in merges])
        if left is None or right is None:
            return None
        return "pair", {"left": left, "right": right}, len(merges)
    return None


def dump_doc(doc: dict[str, Any]) -> Compiled:
    """``doc`` as a cache entry (see the module docstring)."""
    model = dict(doc["model"])
    sections: dict[str, bytes] = {}
    meta: dict[str, Any] = {"vocab": None, "merges": None}
    vocab = _split_vocab(model.get("vocab"))
    if vocab is not None:
        sections["vocab_keys"], sections["vocab_ids"], meta["vocab"] = vocab
        model["vocab"] = None
    merges = _split_merges(model.get("merges"))
    if merges is not None:
        form, parts, count = merges
        sections.update(parts)
        meta["merges"] = [form, count]
        model["merges"] = None
    rest = {k: (model if k == "model" else v) for k, v in doc.items()}
    sections["doc"] = json.dumps(rest, ensure_ascii=True, allow_nan=True).encode("ascii")
    return compiled(meta, sections)


def restore_doc(data: Compiled, size: int, source: str) -> dict[str, Any]:
    """The document :func:`dump_doc` stored (``size``: the artifact's byte count, which bounds its ids). Raises
    ``ValueError``/``KeyError``/``TypeError`` for an inconsistent entry."""
    sections, meta = data.sections, data.meta
    doc = json.loads(bytes(sections["doc"]))
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ValueError("cached tokenizer.json document has no model")
    model = doc["model"]
    if meta["vocab"] is not None:
        count = int(meta["vocab"])
        ids = read_array(sections["vocab_ids"], "I", count)
        if model.get("vocab") is not None:
            raise ValueError("cached document has a vocabulary in both places")
        if model.get("type") == "BPE" and native.available():  # a dict on first use (a restored model needs none)
            id_range = native.check_packed_vocab(sections["vocab_keys"], sections["vocab_ids"], count)  # no repeats
            if count:
                _check_ids(id_range, "model.vocab id", size, source)
            model["vocab"] = LazyVocab(_text(sections["vocab_keys"]), ids, count, id_range)
        else:
            keys = unpack_strings(sections["vocab_keys"], count)
            id_list = ids.tolist()  # (min and max read a list's ints faster than an array, which makes one per item)
            model["vocab"] = dict(zip(keys, id_list, strict=True))
            if len(model["vocab"]) != count:
                raise ValueError("cached vocabulary has repeated tokens")
            if count:
                _check_ids((min(id_list), max(id_list)), "model.vocab id", size, source)
    if meta["merges"] is not None:
        form, count = meta["merges"]
        # split on first use (a warm load with a restored compiled model needs only the count); pairs as tuples:
        # every reader takes a pair as a list or a tuple
        if form == "str":
            model["merges"] = LazyMerges([_text(sections["merges"])], int(count))
        elif form == "pair":
            model["merges"] = LazyMerges([_text(sections["left"]), _text(sections["right"])], int(count))
        else:
            raise ValueError(f"cached merges of unknown form {form!r}")
    added = doc.get("added_tokens")
    if isinstance(added, list):
        _check_ids([e["id"] for e in added if isinstance(e, dict) and isinstance(e.get("id"), int)],
                   "added_tokens id", size, source)
    return doc


def _text(blob: bytes | memoryview) -> str:
    """A packed string section's text (``UnicodeDecodeError``, a ``ValueError``, when it is not UTF-8)."""
    return str(blob, "utf-8", "surrogatepass")


def _check_ids(ids: list[int] | tuple[int, int], what: str, size: int, source: str) -> None:
    """:func:`~app.engine.artifact_limits.check_ids`, its error a ``ValueError`` (the parse refuses such a file,
    so a cache entry that holds one is damaged)."""
    try:
        check_ids(ids, what, size, source)
    except ArtifactError as exc:
        raise ValueError(str(exc)) from None


def cached_hf_doc(artifact: VerifiedArtifact, source: str, derived: Derive,
                  parse: Callable[[bytes, str], dict[str, Any]]) -> dict[str, Any]:
    """The document of a verified ``tokenizer.json`` artifact from the cache (its bytes read and ``parse``d, and
    checked, only on a miss)."""
    return derived("hf-doc", lambda: parse(artifact.read(), source), dump_doc,
                   lambda c: restore_doc(c, artifact.size, source))
