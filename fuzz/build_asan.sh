#!/usr/bin/env bash
# Build the compiled core with AddressSanitizer + UndefinedBehaviorSanitizer into fuzz/build/asan (the in-tree
# build is not touched), then:
#   0. grow: the atheris harness (fuzz/fuzz_engine.py), coverage-guided, on the normal build for $GROW_SECONDS
#      (default 60), adding inputs to fuzz/build/corpus. (gcc's libasan, preloaded for step 1, shadows libFuzzer's
#      coverage callbacks, so the sanitized run alone gets no coverage feedback; this step supplies it.)
#   1. replay: every input of that corpus, then random mutations of them, through the same harness with the
#      sanitized core for $FUZZ_SECONDS (default 120) (fuzz/run_sanitized.py replay);
#      `fuzz` instead runs atheris itself under the sanitizers (no coverage feedback there, see above);
#   2. tests: the native differential tests (tests/engine/test_native*.py) and the reliability engine fuzz tests,
#      with the sanitized core.
# Any sanitizer report aborts the run with a non-zero status.
#   usage: bash fuzz/build_asan.sh [build|grow|replay|fuzz|tests|all]      (default: all = build grow replay tests)
#   env:   PYTHON (default: python3 on PATH, e.g. the venv's), FUZZ_SECONDS, CC (default gcc)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CC=${CC:-gcc}
WHAT=${1:-all}
OUT=fuzz/build/asan
mkdir -p "$OUT" fuzz/build/corpus
INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
CORE="$OUT/_core$SUFFIX"

if [[ $WHAT == build || $WHAT == all || ! -f $CORE ]]; then
  "$CC" -shared -fPIC -std=c11 -O1 -g -fno-omit-frame-pointer -fno-strict-aliasing \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -I"$INC" -Iapp/engine/_native app/engine/_native/tokcore.c -o "$CORE"
  echo "built $CORE"
fi

if [[ $WHAT == grow || $WHAT == all ]]; then
  "$PY" fuzz/fuzz_engine.py -max_total_time="${GROW_SECONDS:-60}" -max_len=4096 -print_final_stats=1 \
    fuzz/build/corpus fuzz/corpus
fi

export LD_PRELOAD="$("$CC" -print-file-name=libasan.so)${LD_PRELOAD:+:$LD_PRELOAD}"
# Python itself leaks by design at exit; ASan's other checks stay on. UBSan: stop at the first report.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TOKENIZER_SANITIZED_CORE="$CORE" TOKENIZER_ENGINE=native PYTHONMALLOC=malloc

if [[ $WHAT == replay || $WHAT == all ]]; then
  "$PY" fuzz/run_sanitized.py replay "${FUZZ_SECONDS:-120}" fuzz/build/corpus fuzz/corpus
fi
if [[ $WHAT == fuzz ]]; then
  "$PY" fuzz/run_sanitized.py fuzz -max_total_time="${FUZZ_SECONDS:-120}" -max_len=4096 -rss_limit_mb=4096 \
    -print_final_stats=1 fuzz/build/corpus fuzz/corpus
fi
if [[ $WHAT == tests || $WHAT == all ]]; then
  "$PY" fuzz/run_sanitized.py pytest -q -p no:cacheprovider tests/engine/test_native.py \
    tests/engine/test_native_scanner.py tests/reliability/test_fuzz_harness.py \
    "tests/reliability/test_hostile.py::test_engine_round_trips_any_text" \
    "tests/reliability/test_hostile.py::test_engine_decodes_arbitrary_id_lists_or_names_the_bad_id" \
    "tests/reliability/test_hostile.py::test_million_character_single_pieces_native"
fi
