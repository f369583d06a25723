"""Build script for the optional compiled extensions (metadata lives in pyproject.toml).

``app.engine._native._core`` (the encoding hot path, ``tokcore.c``, and the ``FastCall`` dispatcher,
``fast_call.h``), ``app.engine._native._trainer`` (the trainer's counter and learners, ``trainer.c`` with
``train_unigram.c``, ``train_wordpiece.c`` and ``train_words.c``), ``app.engine._native._mergebpe`` (BPE over a merge
list, ``mergebpe.c``), ``app.engine._native._wordpiece`` (WordPiece and the BERT normalizer, ``wordpiece.c``),
``app.engine._native._spbpe`` (SentencePiece BPE by piece score, ``spbpe.c``) and ``app.engine._native._unigram``
(Unigram Viterbi and SentencePiece's normalizer with a precompiled charsmap, ``unigram.c``) are C extensions built
with the compiler and Python headers of the machine. All are ``optional``: without a compiler (or headers) the build
prints a warning, the package still installs, and the engine and trainer run the pure-Python reference (slower),
logging that they do.
"""

from setuptools import Extension, setup

NATIVE = "app/engine/_native"
HEADERS = [f"{NATIVE}/bytes_hash.h", f"{NATIVE}/pretokenizer.h", f"{NATIVE}/unicode_tables.h",
           f"{NATIVE}/bert_tables.h", f"{NATIVE}/hash_mix.h", f"{NATIVE}/py_items.h", f"{NATIVE}/word_cache.h",
           f"{NATIVE}/sp_rules.h", f"{NATIVE}/sp_scripts.h", f"{NATIVE}/fast_call.h",
           f"{NATIVE}/utf8_put.h", f"{NATIVE}/scrub_text.h", f"{NATIVE}/dump_bytes.h", f"{NATIVE}/nfc_check.h",
           f"{NATIVE}/nfc_tables.h", f"{NATIVE}/batch_threads.h", f"{NATIVE}/id_list.h"]


def _extension(module: str, *sources: str) -> Extension:
    return Extension(f"app.engine._native.{module}", sources=[f"{NATIVE}/{s}" for s in sources], depends=HEADERS,
                     extra_compile_args=["-O3", "-std=c11", "-fno-strict-aliasing", "-ffp-contract=off"],
                     optional=True)


setup(ext_modules=[_extension("_core", "tokcore.c"),
                  _extension("_trainer", "trainer.c", "train_unigram.c", "train_wordpiece.c", "train_words.c"),
                  _extension("_mergebpe", "mergebpe.c"), _extension("_wordpiece", "wordpiece.c"),
                  _extension("_spbpe", "spbpe.c"), _extension("_unigram", "unigram.c")])
