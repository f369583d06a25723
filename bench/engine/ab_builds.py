"""Two or more builds of the compiled rank core, timed against each other in one process (interleaved A/B).

``python -m bench.engine.ab_builds --tokenizer o200k_base --build base=HEAD~1 --build new=HEAD --rounds 15``

Each ``--build NAME=REV[:FLAGS]`` compiles ``app/engine/_native/tokcore.c`` (with its headers) as it is at git
revision ``REV`` (``WORK``: the working tree), with the extra compiler flags ``FLAGS`` (e.g. ``-DSOME_MACRO=3``),
into a temporary directory, and loads it as its own module. Every build's cores are made from the same ranks and
checked to give the first build's ids on the peer benchmark's documents (:mod:`bench.peers.workloads`) before
anything is timed. Then, round after round and build after build (interleaved, so the machine's drift hits every
build alike), this thread's CPU time of:

* **cold**: encoding every document once after ``clear_cache()`` (a fresh instance's first pass);
* **warm**: the same pass again;
* **bpe**: ``count_pieces`` of the distinct pieces of the documents that are not tokens, on a core without piece
  cache (merging alone).

It prints each build's medians and, for every build after the first, the median over rounds of its time divided by
the first build's in the same round: on a shared VM whose speed drifts by 10-30 % from minute to minute, that ratio
is steadier than either median (docs/performance.md). Needs ``gcc``, ``git`` and the Python headers.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NATIVE = "app/engine/_native"
SOURCES = ("tokcore.c",)


@dataclass
class Build:
    """One build: its name, git revision (``WORK`` for the working tree) and extra compiler flags."""

    name: str
    rev: str
    flags: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, spec: str) -> Build:
        """``NAME=REV[:FLAGS]`` (flags separated by spaces)."""
        name, _, rest = spec.partition("=")
        rev, _, flags = rest.partition(":")
        if not name or not rev:
            raise ValueError(f"--build wants NAME=REV[:FLAGS], not {spec!r}")
        return cls(name, rev, flags.split())


def _source_tree(build: Build, into: Path) -> Path:
    """The directory holding tokcore.c and its headers at the build's revision."""
    if build.rev == "WORK":
        return REPO / NATIVE
    out = into / "src"
    out.mkdir(parents=True)
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{build.rev}:{NATIVE}"],
                           check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith((".c", ".h")):
            blob = subprocess.run(["git", "-C", str(REPO), "show", f"{build.rev}:{NATIVE}/{name}"], check=True,
                                  capture_output=True).stdout
            (out / name).write_bytes(blob)
    return out


def compile_build(build: Build, workdir: Path) -> Any:
    """The build's ``_core`` module, compiled into ``workdir`` and imported under a name of its own."""
    here = workdir / build.name
    here.mkdir(parents=True)
    src = _source_tree(build, here)
    target = here / "_core.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O3", "-std=c11", "-fno-strict-aliasing", "-ffp-contract=off",
                    "-DNDEBUG", *build.flags, f"-I{include}", f"-I{src}", *(str(src / s) for s in SOURCES),
                    "-o", str(target)], check=True)
    name = f"ab_{build.name}._core"  # a distinct module per build; the last part names PyInit__core
    loader = importlib.machinery.ExtensionFileLoader(name, str(target))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def measure(tokenizer: str, builds: list[Build], rounds: int, docs_per_corpus: int,
            data_dir: Path | None = None) -> dict[str, dict[str, list[float]]]:
    """CPU seconds per round of each build's cold, warm and bpe passes (module docstring); ``data_dir``: the
    corpora's (:mod:`bench.corpora`)."""
    from app.engine.encoding import RankBPETokenizer
    from app.engine.registry import get_store, load_encoding
    from bench.peers import workloads

    docs = workloads.documents(workloads.corpora_texts(data_dir), docs_per_corpus)
    tok = load_encoding(get_store().spec(tokenizer), cache_size=0)
    ref = tok.native_core if isinstance(tok, RankBPETokenizer) else None
    if ref is None or not isinstance(tok, RankBPETokenizer):
        raise SystemExit(f"{tokenizer} does not run on the compiled rank core")
    ranks = dict(tok.ranks.items())
    pieces = {p.encode() for d in docs for p in ref.split(d)}
    merged = [p for p in pieces if len(ref.bpe(p)) > 1]
    expected = [ref.count(d) for d in docs]
    cores: dict[str, tuple[Any, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ab-builds-") as tmp:
        for build in builds:
            module = compile_build(build, Path(tmp))
            cached, plain = module.Core(ranks, ref.scanner, 16_384), module.Core(ranks, ref.scanner, 0)
            if [cached.count(d) for d in docs] != expected or plain.count_pieces(merged) != ref.count_pieces(merged):
                raise SystemExit(f"build {build.name} gives other counts than the installed core")
            cores[build.name] = (cached, plain)
    times: dict[str, dict[str, list[float]]] = {b.name: {"cold": [], "warm": [], "bpe": []} for b in builds}
    for _ in range(rounds):
        for name, (cached, plain) in cores.items():
            cached.clear_cache()
            for what in ("cold", "warm"):
                t = time.thread_time()
                for d in docs:
                    cached.encode(d)
                times[name][what].append(time.thread_time() - t)
            t = time.thread_time()
            plain.count_pieces(merged)
            times[name]["bpe"].append(time.thread_time() - t)
    return times


def report(times: dict[str, dict[str, list[float]]]) -> str:
    """Medians in ms per round, and each build's median per-round ratio to the first build."""
    names = list(times)
    lines = []
    for name in names:
        cells = "  ".join(f"{k} {statistics.median(v) * 1e3:.2f} ms" for k, v in times[name].items())
        lines.append(f"{name}: {cells}")
    first = times[names[0]]
    for name in names[1:]:
        ratios = "  ".join(
            f"{k} {statistics.median(b / a for a, b in zip(first[k], v, strict=True)):.3f}"
            for k, v in times[name].items())
        lines.append(f"{name} / {names[0]} (median per-round ratio of times): {ratios}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizer", default="o200k_base")
    p.add_argument("--build", action="append", required=True, help="NAME=REV[:FLAGS], two or more")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--docs-per-corpus", type=int, default=8)
    p.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last one allowed)")
    p.add_argument("--data-dir", type=Path, default=None, help="bench.corpora data directory")
    args = p.parse_args(argv)
    builds = [Build.parse(s) for s in args.build]
    if len(builds) < 2 or len({b.name for b in builds}) != len(builds):
        p.error("give two or more builds with distinct names")
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu})
    print(report(measure(args.tokenizer, builds, args.rounds, args.docs_per_corpus, args.data_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
