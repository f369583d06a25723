"""Mistral's tekken tokenizer files (``tekken_*.json``) as byte-level
:class:`~app.engine.encoding.RankBPETokenizer`\\ s.

A tekken file holds a byte-level BPE vocabulary in rank order (``vocab``: base64 ``token_bytes`` by ``rank``), its
split pattern and sizes (``config``), and optionally its special tokens. As ``mistral-common`` reads it:

* the ordinary vocabulary is the first ``default_vocab_size - default_num_special_tokens`` entries;
* special tokens take ids ``0 .. default_num_special_tokens - 1``: the file's ``special_tokens`` list, or for files
  without one the 20 names of :data:`DEFAULT_SPECIALS` (``<unk>``, ``<s>``, ``</s>``, ``[INST]`` …), the rest
  filled with ``<SPECIAL_{id}>``;
* an ordinary token's id is its rank plus the number of special tokens.

Ranks and ids differ by a constant, so rank order is id order and the tokenizer is exactly a byte-level
``RankBPETokenizer`` over ``{bytes: rank + offset}`` — the compiled core's fast path. ``add_special_tokens=True`` adds
``<s>`` (BOS) before the text, as ``mistral-common``'s ``encode(text, bos=True, eos=False)`` does.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .artifact_cache import ArtifactCache, Compiled
from .artifact_limits import check_id
from .artifact_regex import PatternRejected
from .encoding import RankBPETokenizer
from .errors import ArtifactError
from .pretokenize import compile_pattern
from .rank_tables import TEKKEN_RANKS, Ranks, dump_ranks, restore_ranks
from .store import TokenizerSpec

#: Special tokens of tekken files that do not list their own (ids 0..19, in this order).
DEFAULT_SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)  # fmt: skip


def parse_tekken(data: bytes, source: str) -> tuple[str, dict[bytes, int], dict[str, int]]:
    """``(pattern, ranks with ids, special tokens)`` of a tekken file; raises :class:`ArtifactError`."""
    try:
        doc: dict[str, Any] = json.loads(data)
        config = doc["config"]
        pattern = str(config["pattern"])
        n_special = int(config["default_num_special_tokens"])
        n_total = int(config["default_vocab_size"])
        check_id(n_special, "default_num_special_tokens", len(data), source)  # before any list of that size
        check_id(n_total, "default_vocab_size", len(data), source)
        n_ordinary = n_total - n_special
        vocab = doc["vocab"]
        if n_ordinary > len(vocab) or n_ordinary < 256 or n_special < 3:
            raise ValueError(f"sizes do not fit: {n_ordinary} ordinary tokens of {len(vocab)}, {n_special} special")
        ranks: dict[bytes, int] = {}
        for i, entry in enumerate(vocab[:n_ordinary]):
            if entry["rank"] != i:
                raise ValueError(f"vocab entry {i} has rank {entry['rank']}")
            token = base64.b64decode(entry["token_bytes"], validate=True)
            if token in ranks:
                raise ValueError(f"vocab entry {i} repeats the bytes of entry {ranks[token] - n_special}")
            ranks[token] = i + n_special
        listed = doc.get("special_tokens")
        names = [str(t["token_str"]) for t in listed] if listed else list(DEFAULT_SPECIALS)
        if listed and [t["rank"] for t in listed] != list(range(len(listed))):
            raise ValueError("special_tokens are not ranked 0..n-1 in order")
        if len(names) > n_special or len(set(names)) != len(names):
            raise ValueError("special_tokens are repeated or more than default_num_special_tokens")
        names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise ArtifactError(source, f"not a tekken tokenizer file: {exc}") from None
    except RecursionError:
        raise ArtifactError(source, "not a tekken tokenizer file: JSON nested too deeply") from None
    try:
        compile_pattern(pattern)  # size, counted repeats, compiles (cached: the encoding reuses it)
    except PatternRejected as exc:
        raise ArtifactError(source, f"config.pattern: {exc}") from None
    return pattern, ranks, {name: i for i, name in enumerate(names)}


Parsed = tuple[str, Ranks, dict[str, int]]


def _dump(parsed: Parsed) -> Compiled:
    pattern, ranks, specials = parsed
    return dump_ranks(ranks, {"pattern": pattern, "specials": sorted(specials, key=specials.__getitem__)})


def _restore(compiled: Compiled) -> Parsed:
    pattern, names = compiled.meta["pattern"], compiled.meta["specials"]
    if type(pattern) is not str or not isinstance(names, list) or not all(type(n) is str for n in names):
        raise TypeError("tekken-ranks: bad meta")
    compile_pattern(pattern)  # cached: the encoding reuses it
    return pattern, restore_ranks(compiled), {name: i for i, name in enumerate(names)}


def load_tekken(spec: TokenizerSpec, *, cache_size: int | None = None, backend: str | None = None,
                artifact_cache: ArtifactCache | None = None) -> RankBPETokenizer:
    """The loader of manifest format ``tekken``: a verified tekken file as a :class:`RankBPETokenizer`.
    ``artifact_cache``: where the parsed file is stored and mapped from (part ``tekken-ranks``; a compressed file
    whose compressed bytes the cache has seen verified is then not decompressed, see
    :func:`app.engine.artifacts.verify_artifact`)."""
    source = str(spec.artifact_path)
    ranks: Ranks
    if artifact_cache is None:
        pattern, ranks, specials = parse_tekken(spec.read_artifact(), source)
    else:
        artifact = spec.verify_artifact(artifact_cache)
        pattern, ranks, specials = artifact_cache.load(spec.sha256, TEKKEN_RANKS,
                                                       lambda: parse_tekken(artifact.read(), source), _dump, _restore)
    tokenizer = RankBPETokenizer(spec.name, pattern=pattern, mergeable_ranks=ranks, special_tokens=specials,
                                 cache_size=cache_size, spec=spec, backend=backend, template=(["<s>"], []))
    spec.check_vocab_size(tokenizer.n_vocab)
    return tokenizer
