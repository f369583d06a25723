# syntax=docker/dockerfile:1
#
# tokenizer-service image: exact BPE tokenization over HTTP on port 8000.
#
#   docker build -t tokenizer-service .
#   docker run --rm -p 8000:8000 tokenizer-service
#   docker compose up --build          # service + Prometheus + Grafana (see docker-compose.yml)
#
# Two stages: `builder` has a compiler and builds the package (and its C extension, when the package's own
# setup.py builds one) into a virtual environment at /opt/venv; `runtime` is a clean slim image that gets only that
# venv, checks every bundled artifact's sha256 during the build (a bad artifact fails `docker build`), and runs the
# service as an unprivileged user. Settings are environment variables with the TOKENIZER_ prefix (app/core/config.py).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# gcc + libc headers for the package's C extension; Python.h is already in the python image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:${PATH}"

WORKDIR /src
# The build context is filtered by .dockerignore (no .git, tests, bench, caches or host-built *.so files).
COPY . .
# Build the project's wheel (compiling any extension here) and install it with its dependencies into the venv.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && pip install --no-cache-dir /wheels/*.whl

# ---------------------------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="tokenizer-service" \
      org.opencontainers.image.description="Exact tiktoken-identical BPE tokenization over HTTP" \
      org.opencontainers.image.licenses="MIT AND LicenseRef-Llama3-Community-License"

# A fixed numeric uid/gid, so USER resolves without /etc/passwd and volume permissions are predictable.
RUN groupadd --system --gid 10001 tokenizer \
    && useradd --system --uid 10001 --gid tokenizer --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin tokenizer

COPY --from=builder /opt/venv /opt/venv
# Licence texts and the NOTICE the bundled artifacts require travel with the image.
COPY tokenizers_store/NOTICE tokenizers_store/licenses/ /usr/share/licenses/tokenizer-service/

# DL3064 flags any name containing "TOKEN"; these are the service's TOKENIZER_* settings, none of them a secret
# (the optional bearer token, TOKENIZER_AUTH_TOKEN, is never baked into the image: pass it at run time).
# hadolint ignore=DL3064
ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TOKENIZER_HOST=0.0.0.0 \
    TOKENIZER_PORT=8000 \
    TOKENIZER_WORKERS=1 \
    TOKENIZER_ARTIFACT_CACHE=/opt/tokenizer-service/compiled

# An empty working directory, so `python -m app` imports the installed package, never a stray source tree.
WORKDIR /srv/tokenizer

# Fail the build unless the compiled extensions import (setup.py builds them as optional: without this check a
# broken compile would silently ship the slow pure-Python engine or trainer), then re-hash and load every artifact of
# the installed store: a missing, truncated or altered file fails the build. Then compile every artifact into the
# compiled artifact cache (TOKENIZER_ARTIFACT_CACHE above; docs/deployment.md): read-only at run time, mapped by every
# worker, so a container starts without re-deriving rank tables; a file that cannot be used is rebuilt in memory.
RUN python -c "import sys; from app.engine import native; from app.engine.training import compiled; from app.engine.pipeline.compiled import MERGE_BPE, SP_BPE, UNIGRAM; from app.engine.pipeline.models.wordpiece import _EXT as WORDPIECE; sys.exit('; '.join(f'no {e.what}: {e.error}' for e in (native.CORE, compiled.TRAINER, MERGE_BPE, WORDPIECE, SP_BPE, UNIGRAM) if e.module is None) or 0)" \
    && python -m app verify \
    && python -m app cache build --quiet

USER 10001:10001

EXPOSE 8000

# slim has no curl: probe the liveness route with the standard library (urlopen raises on any non-2xx status).
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

# On SIGTERM (docker stop) uvicorn stops accepting and finishes in-flight requests for up to
# TOKENIZER_GRACEFUL_TIMEOUT seconds (default 30); compose's stop_grace_period leaves it that long before SIGKILL.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8000"]
