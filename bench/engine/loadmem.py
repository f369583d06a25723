"""Child process for the load-time / resident-memory benchmark (run by ``bench.engine.run``, one fresh process
per measurement).

``python -m bench.engine.loadmem ours [BACKEND]``: import ``app.engine`` and load every bundled encoding.
``python -m bench.engine.loadmem tiktoken SPECS_JSON``: build a ``tiktoken.Encoding`` for each
``[name, artifact_path, pattern, special_tokens]`` in the JSON list (read from our artifact files).
``python -m bench.engine.loadmem refs REFS_JSON``: the reference libraries in one process, each on its own files:
``{"tiktoken": [[name, path, pattern, special_tokens], ...], "tokenizers": [[name, tokenizer_json_path], ...],
"sentencepiece": [[name, model_path], ...]}`` (``bench.service.startup`` writes the files).
``python -m bench.engine.loadmem ours [BACKEND] [NAMES]``: ``NAMES`` (comma-separated) restricts what is loaded.
``python -m bench.engine.loadmem none``: the bare interpreter, as a baseline.

Prints one JSON object: ``load_s`` (seconds from this module's first line to all loaded, imports included),
``rss_kib`` (VmRSS after loading) and ``hwm_kib`` (VmHWM, peak RSS), ``encodings`` (names loaded), and
``smaps`` (this process's ``/proc/self/smaps_rollup`` in KiB: ``rss``, ``pss``, ``uss`` = private clean + dirty).
"""

import time

_T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def smaps_kib(pid: int | str = "self") -> dict[str, int]:
    """RSS, PSS and USS (private clean + private dirty) of a process in KiB, from ``/proc/<pid>/smaps_rollup``."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return {"rss": fields.get("Rss", -1), "pss": fields.get("Pss", -1),
            "uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)}


def main(argv: list[str]) -> int:
    """Load what ``argv`` names, then print the measurement as JSON."""
    kind = argv[0]
    names: list[str] = []
    keep: object = None
    if kind == "ours":
        backend = argv[1] if len(argv) > 1 and argv[1] != "default" else None
        import app.engine as engine

        only = argv[2].split(",") if len(argv) > 2 and argv[2] else None
        if backend is None:
            keep = engine.load_all(names=only)
        else:
            keep = {n: engine.get_tokenizer(n, backend=backend) for n in engine.list_tokenizers()}  # type: ignore[call-arg]
        names = list(keep)  # type: ignore[call-overload]
    elif kind == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        encs = []
        for name, path, pattern, specials in json.loads(argv[1]):
            encs.append(tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(path),
                                          special_tokens=specials))
            names.append(name)
        keep = encs
    elif kind == "refs":
        refs = json.loads(argv[1])
        loaded: list[object] = []
        if refs.get("tiktoken"):
            import tiktoken
            from tiktoken.load import load_tiktoken_bpe

            for name, path, pattern, specials in refs["tiktoken"]:
                loaded.append(tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(path),
                                                special_tokens=specials))
                names.append(name)
        if refs.get("tokenizers"):
            import tokenizers

            for name, path in refs["tokenizers"]:
                loaded.append(tokenizers.Tokenizer.from_file(path))
                names.append(name)
        if refs.get("sentencepiece"):
            import sentencepiece

            for name, path in refs["sentencepiece"]:
                loaded.append(sentencepiece.SentencePieceProcessor(model_file=path))
                names.append(name)
        keep = loaded
    elif kind != "none":
        raise SystemExit(f"unknown kind {kind!r}")
    load_s = time.perf_counter() - _T0
    print(json.dumps({"kind": kind, "load_s": load_s, "rss_kib": _status_kib("VmRSS"),
                      "hwm_kib": _status_kib("VmHWM"), "encodings": names, "smaps": smaps_kib()}))
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
