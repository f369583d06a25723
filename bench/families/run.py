"""SentencePiece, tekken and GGUF tokenizers vs their reference libraries on the same files, one thread.

``python -m bench.families.run [--tokenizers a,b] [--bytes N] [--runs R] [--clock wall|cpu] [--json PATH]
[--hostile CHARS]``

References: ``sentencepiece`` (the bundled ``.model``, or a model rebuilt from the GGUF's own pieces), Hugging
Face ``tokenizers`` (a tokenizer built from the GGUF vocabulary: bge WordPiece, qwen2 byte-level BPE, xlm-roberta
Unigram as XLM-R's tokenizer.json defines it; for the SentencePiece BPE models a byte-fallback merge-list BPE built
from the sentencepiece model as Hugging Face's converter does: every split of a mergeable piece into two pieces is a
merge, ranked by the piece's score) and ``mistral-common`` (tekken); only references whose ids ours equal are timed,
except Hugging Face on ``xlm-roberta-sentencepiece`` (the Unigram pipeline today's ``transformers`` converter would
build from the same vocabulary), which breaks some exact ties otherwise than ``sentencepiece``: it is timed anyway
and the texts where it differs are counted.
Two workloads from :mod:`bench.corpora` (english plus every multilingual corpus, ``--bytes`` in total): 10 KB
documents and short chat-sized lines (~50 bytes). Ids are checked identical first (the run stops otherwise); then
``R`` interleaved rounds time ours cold (cache cleared), ours warm (same pass again) and each reference. Medians in
MB/s of UTF-8 input. The reference builders are shared with the test suite (``harness/references.py``), so
run it from the repository root.

``--clock cpu`` times the rounds by this thread's CPU time instead of wall time (steadier on a shared machine).
``--hostile CHARS``: instead, the linearity check of each tokenizer on adversarial texts (:data:`HOSTILE`:
:data:`bench.corpora.HOSTILE` plus WordPiece's own worst cases) of ``CHARS`` and 4 x ``CHARS`` characters: the
CPU-time ratio (best of ``R`` calls each, this thread's CPU time) must stay at most 5 for the issue's linearity
target.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")

from bench.pipeline.run import _commit, _docs  # noqa: E402

NAMES = ["mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3", "xlm-roberta", "xlm-roberta-sentencepiece",
         "bge-small-en-v1.5", "qwen2", "mistral-nemo"]


def references(name: str) -> dict[str, Callable[[str], list[int]]]:
    """Reference encoders by library for one bundled tokenizer."""
    from harness.references import sentencepiece_reference, tekken_reference

    refs: dict[str, Callable[[str], list[int]]] = {}
    if name in ("mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3", "xlm-roberta-sentencepiece"):
        sp = sentencepiece_reference(name)
        refs["sentencepiece"] = sp.encode
    if name == "mistral-nemo":
        tk = tekken_reference(name)
        refs["mistral-common"] = lambda t: tk.encode(t, bos=False, eos=False)
    hf = _hf(name)
    if hf is not None:
        refs["hf"] = lambda t: hf.encode(t, add_special_tokens=False).ids
    return refs


SP_BPE = ("mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3")


def hf_sentencepiece_bpe(name: str) -> Any:
    """A Hugging Face ``tokenizers`` BPE equivalent to a SentencePiece BPE model (read through ``sentencepiece``'s
    own message classes): merges ordered by the score of the piece they make, ``▁`` prepended and for spaces,
    byte fallback, fused unknowns, user-defined pieces as added tokens."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import AddedToken, Tokenizer, models, normalizers

    from harness.references import sentencepiece_reference

    proto = pb.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(sentencepiece_reference(name).serialized_model_proto())
    vocab: dict[str, int] = {}
    for i, p in enumerate(proto.pieces):
        vocab.setdefault(p.piece, i)
    # normal, user-defined and unused pieces are what a merge can make
    mergeable = {p.piece: (p.score, i) for i, p in enumerate(proto.pieces) if p.type in (1, 4, 5)}
    merges = sorted((-score, i, vocab[piece[:k]], vocab[piece[k:]], piece[:k], piece[k:])
                    for piece, (score, i) in mergeable.items() for k in range(1, len(piece))
                    if piece[:k] in vocab and piece[k:] in vocab)
    model = models.BPE(vocab, [(m[4], m[5]) for m in merges], unk_token=proto.pieces[proto.trainer_spec.unk_id].piece,
                       fuse_unk=True, byte_fallback=proto.trainer_spec.byte_fallback)
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.add_tokens([AddedToken(p.piece, normalized=False, special=False) for p in proto.pieces if p.type == 4])
    return tok


#: references timed even where their ids differ from ours on some texts (counted in the results)
TOLERATED = {("xlm-roberta-sentencepiece", "hf")}


def _hf(name: str) -> Any:
    if name in SP_BPE:
        return hf_sentencepiece_bpe(name)
    if name == "xlm-roberta":  # XLM-R's own tokenizer.json: the reference whose ids ours equal
        from harness.references import hf_xlm_roberta_reference

        return hf_xlm_roberta_reference()
    if name == "xlm-roberta-sentencepiece":
        from harness.references import hf_unigram_reference

        return hf_unigram_reference(name)
    if name == "bge-small-en-v1.5":
        from harness.references import hf_bert

        return hf_bert()
    if name == "qwen2":
        from harness.references import hf_qwen2

        return hf_qwen2()
    return None


def _cycle(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def _hostile() -> dict[str, Callable[[int], str]]:
    """Adversarial texts by name (n -> about n characters): the shared generators plus WordPiece's worst cases."""
    from bench.corpora import HOSTILE as SHARED

    return {
        **SHARED,  # a_run is one word of n characters (1 MB at n = 1,000,000)
        "words_100": _cycle("x" * 100 + " "),  # longest words still split (max_input_chars_per_word = 100)
        "words_101": _cycle("y" * 101 + " "),  # shortest words that become [UNK]
        "fail_at_end": _cycle("abcdefghij" * 9 + "abcdefghi\u0378 "),  # 100 characters walked, then unknown
        "punctuation": _cycle("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u3001\u00bf"),
        "combining": _cycle("e\u0301\u0316a\u0300\u0327\u0308o\u0302 "),
        "marks_one_word": lambda n: "a" + "\u0301" * (n - 1),  # one word: a letter under n - 1 accents
        "reordering": _cycle("a\U0001D16D\u0301\U0001D165 "),  # NFD reorders across characters: whole text
        "controls": _cycle("a\x00b\x01c\x7f\u200bd\ufeff\x85e\u00ad "),
        "mixed_scripts": _cycle("Straße ΣΊΣΥΦΟΣ İstanbul 日本語 한국어 ק\u05b8מ\u05b7ץ "),
    }


def hostile_one(name: str, chars: int, runs: int) -> dict[str, Any]:
    """Seconds per call at ``chars`` and 4 x ``chars`` characters, per adversarial text, and their ratio."""
    from app.engine import get_tokenizer

    ours = get_tokenizer(name)
    out: dict[str, Any] = {"tokenizer": name, "type": type(ours).__name__, "backend": ours.backend, "inputs": {}}
    for gen_name, gen in _hostile().items():
        small, large = gen(chars), gen(4 * chars)
        times = []
        for text in (small, large):
            best = float("inf")
            for _ in range(runs):
                ours.clear_cache()
                started = time.thread_time()  # CPU time of this thread: steadier than wall time on a shared machine
                ours.encode(text)
                best = min(best, time.thread_time() - started)
            times.append(best)
        out["inputs"][gen_name] = {"chars": [len(small), len(large)], "s": times, "ratio": times[1] / times[0]}
    return out


def render_hostile(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"commit {meta['commit']}, {meta['machine']}, load average at start {meta['loadavg']}", "",
             "| tokenizer | input | n chars | CPU ms at n | CPU ms at 4n | ratio (<= 5) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for gen_name, v in r["inputs"].items():
            lines.append(f"| {r['tokenizer']} ({r['type']}, {r['backend']}) | {gen_name} | {v['chars'][0]:,} | "
                         f"{v['s'][0] * 1e3:.2f} | {v['s'][1] * 1e3:.2f} | {v['ratio']:.2f} |")
    return "\n".join(lines)


def _lines(docs: list[str]) -> list[str]:
    out: list[str] = []
    for d in docs:
        for i in range(0, len(d) - 50, 50):
            out.append(d[i:i + 50])
    return out


#: The clock of the throughput rounds: wall time (default) or this thread's CPU time (``--clock cpu``: every
#: library here encodes one text on the calling thread, and CPU time does not count the waits of a shared machine).
CLOCK: Callable[[], float] = time.perf_counter


def _time(fn: Callable[[], object]) -> float:
    t = CLOCK()
    fn()
    return CLOCK() - t


def _time_workload(ours: Any, refs: dict[str, Callable[[str], list[int]]], texts: list[str],
                   runs: int) -> dict[str, list[float]]:
    """Seconds per pass: ours cold (cache cleared) and warm, then each reference; rounds alternate the order."""
    timings: dict[str, list[float]] = {"ours_cold": [], "ours_warm": [], **{lib: [] for lib in refs}}

    def ours_pass() -> None:
        for x in texts:
            ours.encode(x)

    def ours_step() -> None:
        ours.clear_cache()
        timings["ours_cold"].append(_time(ours_pass))
        timings["ours_warm"].append(_time(ours_pass))

    def ref_step(lib: str) -> Callable[[], None]:
        ref = refs[lib]
        return lambda: timings[lib].append(_time(lambda: [ref(x) for x in texts]))

    steps = [ours_step, *(ref_step(lib) for lib in refs)]
    for r in range(runs):
        for step in steps if r % 2 == 0 else steps[::-1]:
            step()
    return timings


def bench_one(name: str, workloads: dict[str, list[str]], runs: int) -> dict[str, Any]:
    from app.engine import get_tokenizer

    t = time.perf_counter()
    ours = get_tokenizer(name)
    load = time.perf_counter() - t
    refs = references(name)
    out: dict[str, Any] = {"tokenizer": name, "type": type(ours).__name__, "backend": ours.backend, "load_s": load,
                           "mb_s": {}, "differing": {}}
    for wname, texts in workloads.items():
        skip = ("<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "<|endoftext|>")
        texts = [x for x in texts if not any(s in x for s in skip)]
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        for lib, ref in refs.items():
            differing = 0
            for i, x in enumerate(texts):
                if ours.encode(x) != ref(x):
                    if (name, lib) not in TOLERATED:
                        raise SystemExit(f"{name}: ids differ from {lib} on {wname} text {i}; not timing")
                    differing += 1
            if (name, lib) in TOLERATED:
                out["differing"][f"{wname} vs {lib}"] = f"{differing}/{len(texts)}"
        timings = _time_workload(ours, refs, texts, runs)
        out["mb_s"][wname] = {k: mb / statistics.median(v) for k, v in timings.items()}
    return out


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"commit {meta['commit']}, {meta['machine']}, load average at start {meta['loadavg']}, "
             f"{meta['clock']} clock", "",
             "| tokenizer | workload | ours cold MB/s | ours warm MB/s | sentencepiece | HF tokenizers | "
             "mistral-common | cold vs fastest reference |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for wname, m in r["mb_s"].items():
            refs = [m[k] for k in ("sentencepiece", "hf", "mistral-common") if k in m]
            cell = {k: f"{m[k]:.2f}" if k in m else "—" for k in ("sentencepiece", "hf", "mistral-common")}
            lines.append(f"| {r['tokenizer']} ({r['type']}, {r['backend']}) | {wname} | {m['ours_cold']:.2f} | "
                         f"{m['ours_warm']:.2f} | {cell['sentencepiece']} | {cell['hf']} | {cell['mistral-common']} "
                         f"| {m['ours_cold'] / max(refs):.2f}x |")
    notes = [f"{r['tokenizer']} {k}: {v} texts differ (timed anyway)" for r in results
             for k, v in r.get("differing", {}).items()]
    notes += [f"{r['tokenizer']} {wname}: ours cold / {lib} = {m['ours_cold'] / m[lib]:.2f}x" for r in results
              for wname, m in r["mb_s"].items() for lib in ("sentencepiece", "hf", "mistral-common")
              if lib in m and len([k for k in ("sentencepiece", "hf", "mistral-common") if k in m]) > 1]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", default=",".join(NAMES))
    parser.add_argument("--bytes", type=int, default=100_000, help="input size per workload (UTF-8 bytes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--hostile", type=int, metavar="CHARS", help="run the linearity check at CHARS and 4 x CHARS")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="time rounds by wall or CPU time")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    meta = {"commit": _commit(), "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}", "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "clock": args.clock}
    if args.hostile:
        found = [hostile_one(name, args.hostile, args.runs) for name in args.tokenizers.split(",")]
        print(render_hostile(found, meta))
        if args.json:
            args.json.write_text(json.dumps({"meta": meta, "results": found}, indent=2) + "\n")
        return 0
    docs = _docs(args.bytes)
    workloads = {"10 KB docs": docs, "50 B lines": _lines(docs)}
    results = []
    for name in args.tokenizers.split(","):
        results.append(bench_one(name, workloads, args.runs))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(render(results, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
