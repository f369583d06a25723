"""Run the fuzz harness or pytest with the sanitized compiled core (``fuzz/build_asan.sh`` calls this).

``$TOKENIZER_SANITIZED_CORE`` names the ASan+UBSan build of ``_core``. It is loaded under the real module name
``app.engine._native._core`` *before* anything imports the engine, so every ``backend="native"`` encoding in this
process runs the sanitized C code; the process checks that libasan and that file are mapped and stops otherwise.

    python fuzz/run_sanitized.py replay SECONDS CORPUS_DIR...   # corpus, then random mutations of it
    python fuzz/run_sanitized.py fuzz [atheris args...]
    python fuzz/run_sanitized.py pytest [pytest args...]

``replay`` exists because gcc's libasan shadows libFuzzer's coverage callbacks: under it atheris gets no coverage
and shrinks any corpus to one input. Replay runs every input of a corpus grown coverage-guided on the normal
build, then mutations of them (bit flips, byte runs, splices, repeats up to 8 KiB) until the time is up.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import random
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_sanitized_core() -> Path:
    """Load ``$TOKENIZER_SANITIZED_CORE`` as ``app.engine._native._core``; returns its path."""
    path = Path(os.environ["TOKENIZER_SANITIZED_CORE"]).resolve()
    name = "app.engine._native._core"
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    maps = Path("/proc/self/maps").read_text()
    if "libasan" not in maps or str(path) not in maps:
        raise SystemExit(f"sanitized core not active (libasan mapped: {'libasan' in maps}; {path} mapped: "
                         f"{str(path) in maps}); run through fuzz/build_asan.sh")
    sys.path.insert(0, str(REPO_ROOT))
    from app.engine import native

    assert native.available() and native._core is module, "the engine did not pick up the sanitized core"
    print(f"sanitized core: {path}", file=sys.stderr)
    return path


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """One random mutation of ``data`` (the first two bytes, op and tokenizer, may change too)."""
    buf = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0 and buf:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        pos = rng.randint(0, len(buf))
        buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == 2:
        other = rng.choice(corpus)
        buf = buf[: rng.randint(0, len(buf))] + bytearray(other[rng.randint(0, len(other)):])
    elif kind == 3 and len(buf) > 2:
        a = rng.randrange(2, len(buf))
        chunk = buf[a: a + rng.randint(1, 32)]
        buf[a:a] = chunk * rng.randint(1, 256)
    elif kind == 4:
        buf[2:2] = bytes([rng.choice(b" \n\ta'0\xe2\xff<|>")]) * rng.randint(1, 4096)
    else:
        buf[:2] = bytes([rng.randrange(256), rng.randrange(256)])
    return bytes(buf[:8192])


def replay(seconds: float, dirs: list[str]) -> int:
    """Run every corpus input, then mutations until ``seconds`` have passed; prints what ran."""
    sys.path.insert(0, str(REPO_ROOT / "fuzz"))
    import fuzz_engine

    corpus = [p.read_bytes() for d in dirs for p in sorted(Path(d).iterdir()) if p.is_file()]
    if not corpus:
        raise SystemExit("empty corpus")
    start = time.monotonic()
    for data in corpus:
        fuzz_engine.check(data)
    rng = random.Random(int(os.environ.get("REPLAY_SEED", "1")))
    runs = len(corpus)
    longest = max(map(len, corpus))
    while time.monotonic() - start < seconds:
        data = mutate(rng, rng.choice(corpus), corpus)
        fuzz_engine.check(data)
        runs += 1
        longest = max(longest, len(data))
    print(f"replay: {len(corpus)} corpus inputs + {runs - len(corpus)} mutations, longest {longest} bytes, "
          f"{time.monotonic() - start:.0f} s, no failure", file=sys.stderr)
    return 0


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("fuzz", "pytest", "replay"):
        print(__doc__, file=sys.stderr)
        return 2
    load_sanitized_core()
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "replay":
        return replay(float(rest[0]), rest[1:])
    if mode == "pytest":
        import pytest

        return int(pytest.main(rest))
    sys.path.insert(0, str(REPO_ROOT / "fuzz"))
    import fuzz_engine

    sys.argv = [sys.argv[0], *rest]
    fuzz_engine.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
