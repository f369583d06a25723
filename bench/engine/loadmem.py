"""Child process for the load-time / resident-memory benchmark (run by ``bench.engine.run``, one fresh process
per measurement).

``python -m bench.engine.loadmem ours [BACKEND]``: import ``app.engine`` and load every bundled encoding.
``python -m bench.engine.loadmem tiktoken SPECS_JSON``: build a ``tiktoken.Encoding`` for each
``[name, artifact_path, pattern, special_tokens]`` in the JSON list (read from our artifact files).
``python -m bench.engine.loadmem none``: the bare interpreter, as a baseline.

Prints one JSON object: ``load_s`` (seconds from this module's first line to all loaded, imports included),
``rss_kib`` (VmRSS after loading) and ``hwm_kib`` (VmHWM, peak RSS), ``encodings`` (names loaded).
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


def main(argv: list[str]) -> int:
    """Load what ``argv`` names, then print the measurement as JSON."""
    kind = argv[0]
    names: list[str] = []
    keep: object = None
    if kind == "ours":
        backend = argv[1] if len(argv) > 1 and argv[1] != "default" else None
        import app.engine as engine

        if backend is None:
            keep = engine.load_all()
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
    elif kind != "none":
        raise SystemExit(f"unknown kind {kind!r}")
    load_s = time.perf_counter() - _T0
    print(json.dumps({"kind": kind, "load_s": load_s, "rss_kib": _status_kib("VmRSS"),
                      "hwm_kib": _status_kib("VmHWM"), "encodings": names}))
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
