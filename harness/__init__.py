"""Helpers shared by the test suite (``tests/``) and the benchmarks (``bench/``), so that neither imports the other.

* :mod:`harness.references` — each family's reference implementation, built from the bundled artifacts;
* :mod:`harness.realtext`, :mod:`harness.texts` — real text in many languages from files this machine already has,
  hostile strings and hostile runs;
* :mod:`harness.server` — starts and stops a real ``python -m app serve`` on loopback;
* :mod:`harness.load` — the async load generator (and ``/proc`` readers for worker pids and memory).

A top-level package rather than part of ``app``: these import the reference libraries (tiktoken, Hugging Face
``tokenizers``, ``sentencepiece``, ``mistral-common``) and drive processes, which the service never needs; the
package is not installed with the service (``pyproject.toml`` packages ``app`` and ``tokenizers_store`` only) and
is kept out of the Docker build context. It may import ``app``; it never imports ``tests`` or ``bench``, and ``app``
never imports it.
"""
