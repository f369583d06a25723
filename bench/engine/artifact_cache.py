"""Load time with the compiled artifact cache off, cold (an empty directory) and warm (filled by an earlier load).

``python -m bench.engine.artifact_cache [--reps 3] [--names a,b] [--json PATH]``

Each measurement is a fresh child process (``python -m bench.engine.artifact_cache child``) that imports the engine
and every loader module first (not timed per tokenizer), then loads the tokenizers of the bundled store one after the
other (``TOKENIZER_TOKENIZERS``-style ``--names`` restricts them) through :func:`app.engine.load_all`'s loader with
``TOKENIZER_ARTIFACT_CACHE`` set to ``off``, a fresh empty directory (``cold``: every derivation is computed and
written) or the directory a cold run filled (``warm``: every derivation is mapped from its verified file). It prints
per-tokenizer seconds, the whole-store seconds (loads only, and from the child's first line with imports), the
cache's counters and VmRSS. Figures are medians over ``--reps``; the warm runs check that nothing was rebuilt.
The artifact's sha256 is checked on every load, in every mode. The OS page cache is warm in every mode (the store's
files and the cache files were read before); a cold-disk start adds their read time.
"""

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
MODES = ("off", "cold", "warm")


def child(names: list[str]) -> dict[str, Any]:
    """Load ``names`` (all when empty) with the cache ``$TOKENIZER_ARTIFACT_CACHE`` names; the measurement."""
    import importlib

    from app.engine import get_store
    from app.engine.loaders import LoadOptions, load_tokenizer
    from app.engine.registry import open_artifact_cache

    for module in ("encoding", "tekken", "char_bpe", "pipeline.hf_json", "pipeline.gguf", "pipeline.sentencepiece"):
        importlib.import_module(f"app.engine.{module}")
    imported = time.perf_counter() - _T0
    store = get_store()
    cache = open_artifact_cache()
    options = LoadOptions(artifact_cache=cache)
    per: dict[str, float] = {}
    keep = []
    start = time.perf_counter()
    for name in names or store.names():
        t = time.perf_counter()
        keep.append(load_tokenizer(store.spec(name), options))
        per[name] = time.perf_counter() - t
    loads = time.perf_counter() - start
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return {"per": per, "loads_s": loads, "process_s": time.perf_counter() - _T0, "import_s": imported,
            "rss_kib": rss, "hits": cache.hits if cache else 0, "misses": cache.misses if cache else 0,
            "rebuilt": cache.rebuilt if cache else 0}


def _run_child(names: list[str], cache: str) -> dict[str, Any]:
    env = {**os.environ, "TOKENIZER_ARTIFACT_CACHE": cache}
    p = subprocess.run([sys.executable, "-m", "bench.engine.artifact_cache", "child", ",".join(names)], cwd=REPO_ROOT,
                       env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def run(names: list[str], reps: int, work: Path) -> dict[str, list[dict[str, Any]]]:
    samples: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for rep in range(reps):
        samples["off"].append(_run_child(names, "off"))
        directory = work / f"rep{rep}"
        shutil.rmtree(directory, ignore_errors=True)
        samples["cold"].append(_run_child(names, str(directory)))
        warm = _run_child(names, str(directory))
        if warm["misses"] or warm["rebuilt"]:
            raise RuntimeError(f"warm run rebuilt files: {warm}")
        samples["warm"].append(warm)
        print(f"[artifact_cache] rep {rep + 1}/{reps}: store loads off {samples['off'][-1]['loads_s']:.2f}s, "
              f"cold {samples['cold'][-1]['loads_s']:.2f}s, warm {warm['loads_s']:.2f}s", file=sys.stderr)
    return samples


def render(samples: dict[str, list[dict[str, Any]]]) -> str:
    def med(mode: str, key: str, name: str | None = None) -> float:
        return statistics.median(s["per"][name] if name else s[key] for s in samples[mode])

    names = list(samples["off"][0]["per"])
    lines = ["| tokenizer | off (s) | cold (s) | warm (s) | warm / off |", "|---|---:|---:|---:|---:|"]
    for n in names:
        off, cold, warm = (med(m, "", n) for m in MODES)
        lines.append(f"| {n} | {off:.3f} | {cold:.3f} | {warm:.3f} | {warm / off:.2f}x |")
    off, cold, warm = (med(m, "loads_s") for m in MODES)
    lines.append(f"| **all loads** | **{off:.2f}** | **{cold:.2f}** | **{warm:.2f}** | **{warm / off:.2f}x** |")
    p_off, p_cold, p_warm = (med(m, "process_s") for m in MODES)
    lines.append(f"| process (imports + loads) | {p_off:.2f} | {p_cold:.2f} | {p_warm:.2f} | {p_warm / p_off:.2f}x |")
    r_off, r_cold, r_warm = (med(m, "rss_kib") / 1024 for m in MODES)
    lines.append(f"| VmRSS after loading (MiB) | {r_off:.0f} | {r_cold:.0f} | {r_warm:.0f} | |")
    hits = samples["warm"][0]["hits"]
    lines.append(f"\nwarm: {hits} cache files used, 0 rebuilt; medians of {len(samples['off'])} runs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "child":
        names = [n for n in (argv[1] if len(argv) > 1 else "").split(",") if n]
        print(json.dumps(child(names)))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--names", default="", help="comma-separated tokenizers (default: the whole bundled store)")
    p.add_argument("--json", help="write the samples here")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-artifact-cache-"))
    try:
        samples = run([n for n in args.names.split(",") if n], args.reps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1))
    print(render(samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
