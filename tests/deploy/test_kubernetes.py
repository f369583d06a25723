"""Kubernetes manifests (deploy/kubernetes): every overlay renders, validates offline, and agrees with the app.

No cluster runs here. These tests render each kustomization with the real kustomize (``kubectl kustomize``),
validate every object against the Kubernetes OpenAPI schemas of the oldest and newest supported versions
(``kubernetes-validate``, strict: unknown fields are errors) and the ServiceMonitor against the Prometheus
operator's CRD schema, then cross-check the objects against the real CLI parser, settings, routes and metrics —
as tests/test_deploy.py does for the Dockerfile and compose file. The sidecar's exec probes run against a real
``serve --uds`` process.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.test_deploy import exported_metrics, final_stage, get_routes, the

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
SERVICEMONITOR_CRD = ROOT / "deploy" / "schema" / "monitoring.coreos.com_servicemonitors.yaml"
#: Oldest version the manifests need (native sidecars: init containers with restartPolicy Always) and the newest
#: schema kubernetes-validate ships.
K8S_VERSIONS = ("1.29.0", kubernetes_validate.utils.latest_version())
SERVICE_IMAGE = "tokenizer-service"  # the image name the manifests use before an overlay's `images:` rewrite
#: Variables the manifests may set that are not TOKENIZER_* settings.
OTHER_ENV = {"PROMETHEUS_MULTIPROC_DIR"}
SIDECAR_EXTRA_ENV = {"TOKENIZER_SOCKET"}  # read by the example model server, not by this service


def kubectl() -> str:
    found = shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl not found: install it (Debian/apt package `kubectl`, kustomize v5 built in)")
    return found


@cache
def render(directory: str) -> tuple[dict[str, Any], ...]:
    """The objects ``kubectl kustomize`` renders for ``deploy/kubernetes/<directory>``."""
    proc = subprocess.run([kubectl(), "kustomize", str(K8S / directory)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"kustomize {directory} failed: {proc.stderr}"
    docs = tuple(d for d in yaml.safe_load_all(proc.stdout) if d)
    assert docs, f"{directory} rendered nothing"
    return docs


def every_rendering() -> list[str]:
    return ["base", *(f"overlays/{o}" for o in OVERLAYS)]


def objects(directory: str, kind: str) -> list[dict[str, Any]]:
    return [d for d in render(directory) if d["kind"] == kind]


def one(directory: str, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in objects(directory, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"{directory}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def all_containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def service_containers(directory: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of every container that runs ``python -m app serve`` in a rendering."""
    for dep in objects(directory, "Deployment"):
        spec = pod_spec(dep)
        for c in all_containers(spec):
            if c.get("command", [])[:4] == ["python", "-m", "app", "serve"]:
                yield spec, c


def env_of(directory: str, container: dict[str, Any]) -> dict[str, Any]:
    """Name -> value (a string, or the ``valueFrom`` mapping) as the container sees it: envFrom ConfigMaps first,
    then ``env`` (which wins, as in Kubernetes)."""
    out: dict[str, Any] = {}
    for src in container.get("envFrom", []):
        ref = src["configMapRef"]["name"]
        out.update(one(directory, "ConfigMap", ref)["data"])
    for var in container.get("env", []):
        out[var["name"]] = var.get("value", var.get("valueFrom"))
    return out


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# ----------------------------------------------------------------------------------------------------------------
# Rendering and schema validation
# ----------------------------------------------------------------------------------------------------------------


def test_every_overlay_is_found() -> None:
    assert {"standalone", "sidecar", "trained-store", "custom-metrics-hpa"} <= set(OVERLAYS)


@pytest.mark.parametrize("directory", every_rendering())
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_objects_validate_against_the_kubernetes_schemas(directory: str, version: str) -> None:
    for obj in render(directory):
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: validated against its own schema below
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{directory}: {obj['kind']}/{obj['metadata']['name']} invalid for {version}: {exc}")


def test_validation_rejects_bad_objects() -> None:
    """The schema check really checks: a mistyped field, an unknown field and a wrong type are all errors."""
    dep = copy.deepcopy(one("base", "Deployment"))
    bad_port = copy.deepcopy(dep)
    pod_spec(bad_port)["containers"][0]["ports"][0]["containerPort"] = "eight thousand"
    unknown = copy.deepcopy(dep)
    pod_spec(unknown)["containers"][0]["readinesProbe"] = pod_spec(unknown)["containers"][0]["readinessProbe"]
    no_image_list = copy.deepcopy(dep)
    pod_spec(no_image_list)["containers"] = {"name": "x"}
    for bad in (bad_port, unknown, no_image_list):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, K8S_VERSIONS[-1], strict=True)


def _closed(schema: Any) -> Any:
    """The CRD schema with unknown fields forbidden wherever it lists its properties (what the API server prunes
    silently is an error here)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@cache
def servicemonitor_validator() -> jsonschema.protocols.Validator:
    crd = yaml.safe_load(SERVICEMONITOR_CRD.read_text(encoding="utf-8"))
    assert crd["spec"]["names"]["kind"] == "ServiceMonitor"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _closed(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("directory", every_rendering())
def test_servicemonitors_validate_against_the_operator_crd(directory: str) -> None:
    for obj in objects(directory, "ServiceMonitor"):
        assert obj["apiVersion"] == "monitoring.coreos.com/v1"
        errors = list(servicemonitor_validator().iter_errors(obj))
        assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_servicemonitor_schema_rejects_bad_objects() -> None:
    good = one("base", "ServiceMonitor")
    typo = copy.deepcopy(good)
    typo["spec"]["endpoints"][0]["intervall"] = "15s"
    bad_interval = copy.deepcopy(good)
    bad_interval["spec"]["endpoints"][0]["interval"] = "fifteen"
    for bad in (typo, bad_interval):
        assert list(servicemonitor_validator().iter_errors(bad)), bad["spec"]


def test_servicemonitor_schema_provenance_recorded() -> None:
    provenance = (ROOT / "deploy" / "schema" / "PROVENANCE.md").read_text(encoding="utf-8")
    assert SERVICEMONITOR_CRD.name in provenance and "prometheus-operator" in provenance
    licence = (ROOT / "deploy" / "schema" / "LICENSE-prometheus-operator-Apache-2.0.txt").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence


# ----------------------------------------------------------------------------------------------------------------
# Cross-checks against the real CLI, settings, routes and metrics
# ----------------------------------------------------------------------------------------------------------------


def parse_serve(container: dict[str, Any]) -> Any:
    from app.cli import build_parser

    argv = [*container["command"], *container.get("args", [])]
    assert argv[:3] == ["python", "-m", "app"]
    return build_parser().parse_args(argv[3:])  # SystemExit on an unknown flag


@pytest.mark.parametrize("directory", every_rendering())
def test_service_command_flags_and_env_are_real(directory: str) -> None:
    from app.core.config import PREFIX, Settings

    known = {PREFIX + f.upper() for f in Settings.__dataclass_fields__}
    found = list(service_containers(directory))
    assert found, f"{directory}: no container runs the service"
    for _, c in found:
        args = parse_serve(c)
        assert args.command == "serve"
        env = env_of(directory, c)
        extra = SIDECAR_EXTRA_ENV if directory.endswith("sidecar") else set()
        names = set(env) - OTHER_ENV - extra
        assert names <= known, f"{directory}: unknown settings {sorted(names - known)}"
        literal = {k: v for k, v in env.items() if k in known and isinstance(v, str)}
        settings = Settings.from_env(literal)  # every literal value parses and validates
        if settings.store is None:  # the bundled store: every tokenizer named must be in it
            from app.engine import get_store

            for name in settings.tokenizer_names() or ():
                get_store().resolve(name)  # UnknownTokenizerError otherwise
        if "TOKENIZER_AUTH_TOKEN" in env:
            ref = env["TOKENIZER_AUTH_TOKEN"]
            assert isinstance(ref, dict) and set(ref) == {"secretKeyRef"}, "the bearer token comes from a Secret"
            assert ref["secretKeyRef"]["name"] and ref["secretKeyRef"]["key"]
    # the token is never written into a rendering, and no Secret with real data is shipped
    assert not objects(directory, "Secret")
    for obj in objects(directory, "ConfigMap"):
        assert "TOKENIZER_AUTH_TOKEN" not in obj.get("data", {})


def test_standalone_ports_probes_and_service_agree() -> None:
    for directory in ("base", "overlays/standalone", "overlays/trained-store", "overlays/custom-metrics-hpa"):
        dep = one(directory, "Deployment", "tokenizer-service")
        ((spec, c),) = service_containers(directory)
        args = parse_serve(c)
        (port,) = c["ports"]
        assert args.host == "0.0.0.0" and args.port == port["containerPort"] and args.uds is None
        probes = {kind: c[kind] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
        for kind, probe in probes.items():
            assert probe["httpGet"]["port"] in (port["name"], port["containerPort"]), kind
            assert probe["httpGet"]["path"] in get_routes(), f"{kind}: {probe['httpGet']['path']} is not open"
        assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
        # the startup probe leaves at least 30 s for verifying artifacts before liveness applies
        startup = probes["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 30
        svc = one(directory, "Service", "tokenizer-service")
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert matches(svc["spec"]["selector"], labels)
        (svc_port,) = svc["spec"]["ports"]
        assert svc_port["targetPort"] in (port["name"], port["containerPort"])
        # the image's port, user and the manifests agree
        assert str(port["containerPort"]) == the(final_stage(), "EXPOSE").args.split()[0].split("/")[0]


def test_graceful_shutdown_fits_the_termination_grace_period() -> None:
    from app.core.config import Settings

    for directory in every_rendering():
        for spec, c in service_containers(directory):
            env = {k: v for k, v in env_of(directory, c).items() if isinstance(v, str)}
            graceful = Settings.from_env(env).graceful_timeout
            pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            sleep = float(pre_stop[1]) if pre_stop[:1] == ["sleep"] else 0.0
            assert spec["terminationGracePeriodSeconds"] > sleep + graceful, directory


@pytest.mark.parametrize("directory", every_rendering())
def test_every_container_is_locked_down_and_sized(directory: str) -> None:
    image_user = int(the(final_stage(), "USER").args.split(":")[0])
    for dep in objects(directory, "Deployment"):
        spec = pod_spec(dep)
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == image_user
        assert pod_sc["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec["automountServiceAccountToken"] is False
        for c in all_containers(spec):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["allowPrivilegeEscalation"] is False and sc.get("privileged", False) is False, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), c["name"]
            res = c["resources"]
            assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"], c["name"]


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity)
    assert m, quantity
    return int(m.group(1)) * units[m.group(2)]


def test_memory_figures_cover_the_measured_footprint() -> None:
    """Requests and limits hold the measured memory (bench/service/RESULTS.md, deploy/kubernetes/base/deployment.yaml):
    the store is loaded once and the workers forked from it share it, so the pod needs one process's load (680 MiB
    PSS with every bundled tokenizer, 2026-12-04 17:45 UTC; 700 here; 240 MiB covers a few named ones) plus what
    each further process owns (a worker, which commits its own piece caches before readiness: up to 60 MiB after
    load, 2026-12-04 21:00 UTC; 65 here)."""
    for directory in every_rendering():
        for _, c in service_containers(directory):
            from app.core.config import Settings

            env = {k: v for k, v in env_of(directory, c).items() if isinstance(v, str)}
            settings = Settings.from_env(env)
            workers = settings.workers
            need = (700 if settings.tokenizers is None else 240) + (65 * workers if workers > 1 else 0)
            assert _mebibytes(c["resources"]["requests"]["memory"]) >= need * 0.9, directory
            assert _mebibytes(c["resources"]["limits"]["memory"]) >= 2 * need, directory


def test_metrics_directory_is_a_writable_emptydir_when_several_workers() -> None:
    from app.core.config import Settings

    for directory in every_rendering():
        for spec, c in service_containers(directory):
            env = env_of(directory, c)
            settings = Settings.from_env({k: v for k, v in env.items() if isinstance(v, str)})
            if settings.workers == 1:
                continue
            path = env.get("PROMETHEUS_MULTIPROC_DIR")
            assert isinstance(path, str), f"{directory}: several workers need PROMETHEUS_MULTIPROC_DIR"
            mount = next(m for m in c["volumeMounts"] if m["mountPath"] == path)
            assert not mount.get("readOnly")
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            assert "emptyDir" in volume


def test_pdb_hpa_networkpolicy_and_servicemonitor_target_the_service() -> None:
    for directory in ("base", "overlays/standalone", "overlays/trained-store", "overlays/custom-metrics-hpa"):
        dep = one(directory, "Deployment", "tokenizer-service")
        labels = dep["spec"]["template"]["metadata"]["labels"]
        pdb = one(directory, "PodDisruptionBudget")
        assert matches(pdb["spec"]["selector"]["matchLabels"], labels)
        hpa = one(directory, "HorizontalPodAutoscaler")
        ref = hpa["spec"]["scaleTargetRef"]
        assert (ref["kind"], ref["name"]) == ("Deployment", dep["metadata"]["name"])
        assert hpa["spec"]["minReplicas"] >= 2, "the PDB needs a second pod to allow a disruption"
        netpol = one(directory, "NetworkPolicy")
        assert matches(netpol["spec"]["podSelector"]["matchLabels"], labels)
        assert netpol["spec"]["egress"] == [] and "Egress" in netpol["spec"]["policyTypes"]
        ((_, c),) = service_containers(directory)
        port_names = {p["name"] for p in c["ports"]} | {p["containerPort"] for p in c["ports"]}
        assert all(p["port"] in port_names for rule in netpol["spec"]["ingress"] for p in rule["ports"])
        svc = one(directory, "Service", "tokenizer-service")
        monitor = one(directory, "ServiceMonitor")
        assert matches(monitor["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
            assert endpoint["path"] in get_routes()
    assert one("base", "HorizontalPodAutoscaler")["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_custom_metrics_hpa_uses_an_exported_histogram() -> None:
    hpa = one("overlays/custom-metrics-hpa", "HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    rules = yaml.safe_load((K8S / "overlays" / "custom-metrics-hpa" / "prometheus-adapter-rules.yaml").read_text())
    (rule,) = rules["rules"]
    assert rule["name"]["as"] == metric["pods"]["metric"]["name"]
    series = re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"])
    assert series and series.group(1).endswith("_bucket")
    family = series.group(1).removesuffix("_bucket")
    assert family in exported_metrics(), f"{family} is not a metric of the service"
    assert re.fullmatch(rule["name"]["matches"], series.group(1))
    assert f"rate({series.group(1)}{{<<.LabelMatchers>>}}" in rule["metricsQuery"]
    assert "by (le, <<.GroupBy>>)" in rule["metricsQuery"]


def test_images_are_pinned_and_rewritten_consistently() -> None:
    for directory in (f"overlays/{o}" for o in OVERLAYS):
        for dep in objects(directory, "Deployment"):
            for c in all_containers(pod_spec(dep)):
                image = c["image"]
                assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), f"{directory}: {image}"
                if c.get("command", [])[:3] == ["python", "-m", "app"]:
                    assert image == "registry.example.com/tokenizer-service:0.1.0", f"{directory}: {image}"


# ----------------------------------------------------------------------------------------------------------------
# Sidecar: Unix socket on a shared emptyDir, exec probes that really work
# ----------------------------------------------------------------------------------------------------------------


def sidecar() -> tuple[dict[str, Any], dict[str, Any]]:
    ((spec, c),) = service_containers("overlays/sidecar")
    return spec, c


def test_sidecar_shares_its_socket_with_the_model_server() -> None:
    spec, c = sidecar()
    assert c in spec.get("initContainers", []) and c.get("restartPolicy") == "Always", "a native sidecar"
    args = parse_serve(c)
    assert args.uds and args.host is None and args.port is None
    sock_dir = str(Path(args.uds).parent)
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == sock_dir)
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume
    others = [x for x in spec["containers"] if x is not c]
    assert others, "the pod has a model server next to the tokenizer"
    for other in others:
        assert any(m["name"] == mount["name"] and m["mountPath"] == sock_dir for m in other["volumeMounts"])
        env = {e["name"]: e.get("value") for e in other.get("env", [])}
        assert env.get("TOKENIZER_SOCKET") == args.uds
    assert not objects("overlays/sidecar", "Service"), "the sidecar is reachable only inside its pod"


def _probe_script(probe: dict[str, Any], socket_path: str, real_path: Path) -> list[str]:
    command = list(probe["exec"]["command"])
    assert command[:2] == ["python", "-c"] and socket_path in command[2]
    return [sys.executable, "-c", command[2].replace(socket_path, str(real_path))]


def test_sidecar_exec_probes_work_against_a_real_server(tmp_path: Path) -> None:
    from tests.api.conftest import start_server

    _, c = sidecar()
    socket_path = parse_serve(c).uds
    sock = tmp_path / "tokenizer.sock"
    probes = {kind: c[kind] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
    paths = {kind: re.search(r"GET (/\w+) HTTP", p["exec"]["command"][2]).group(1) for kind, p in probes.items()}  # type: ignore[union-attr]
    assert paths["readinessProbe"] == "/readyz" and paths["livenessProbe"] == "/healthz"
    assert set(paths.values()) <= get_routes()
    for kind, probe in probes.items():  # nothing listens yet: every probe fails
        proc = subprocess.run(_probe_script(probe, socket_path, sock), capture_output=True, timeout=30)
        assert proc.returncode != 0, kind
    server = start_server(tmp_path, uds=sock)
    try:
        for kind, probe in probes.items():
            proc = subprocess.run(_probe_script(probe, socket_path, sock), capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, f"{kind}: {proc.stderr}"
        # a probe that asks for a path the server does not answer with 200 fails
        wrong = copy.deepcopy(probes["readinessProbe"])
        wrong["exec"]["command"][2] = wrong["exec"]["command"][2].replace("/readyz", "/no-such-route")
        assert subprocess.run(_probe_script(wrong, socket_path, sock), capture_output=True, timeout=30).returncode
    finally:
        server.stop()


# ----------------------------------------------------------------------------------------------------------------
# Trained store: copied by an init container, verified, mounted read-only as TOKENIZER_STORE
# ----------------------------------------------------------------------------------------------------------------


def test_trained_store_is_verified_and_mounted_read_only() -> None:
    from app.cli import build_parser

    directory = "overlays/trained-store"
    spec, c = next(service_containers(directory))
    store = env_of(directory, c)["TOKENIZER_STORE"]
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == store)
    assert mount["readOnly"] is True
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume or "persistentVolumeClaim" in volume or "image" in volume
    inits = {i["name"]: i for i in spec["initContainers"]}
    verify = next(i for i in inits.values() if i["command"][:4] == ["python", "-m", "app", "verify"])
    args = build_parser().parse_args([*verify["command"][3:], *verify.get("args", [])])
    assert args.command == "verify" and args.store == store
    assert any(m["name"] == mount["name"] and m["mountPath"] == store for m in verify["volumeMounts"])
    writers = [i for i in inits.values() if i is not verify
               and any(m["name"] == mount["name"] and not m.get("readOnly") for m in i["volumeMounts"])]
    assert len(writers) == 1, "one init container fills the store volume"
    assert list(inits).index(writers[0]["name"]) < list(inits).index(verify["name"]), "copy, then verify"
    writer_mount = next(m for m in writers[0]["volumeMounts"] if m["name"] == mount["name"])
    assert any(arg.rstrip("/").startswith(writer_mount["mountPath"]) for arg in writers[0]["command"])
    # the compiled artifact cache of the same store: built after the copy, read-only where the service maps it
    cache_dir = env_of(directory, c)["TOKENIZER_ARTIFACT_CACHE"]
    compile_ = next(i for i in inits.values() if i["command"][:5] == ["python", "-m", "app", "cache", "build"])
    args = build_parser().parse_args([*compile_["command"][3:], *compile_.get("args", [])])
    assert args.store == store and args.dir == cache_dir
    assert list(inits).index(writers[0]["name"]) < list(inits).index(compile_["name"])
    cache_mount = next(m for m in c["volumeMounts"] if cache_dir.startswith(m["mountPath"] + "/"))
    assert cache_mount["readOnly"] is True
    assert any(m["name"] == cache_mount["name"] and not m.get("readOnly") for m in compile_["volumeMounts"])


def test_verify_command_checks_a_store_directory(tmp_path: Path) -> None:
    """What the verify-store init container runs: exit 0 on a good store, non-zero on a damaged one."""
    store = tmp_path / "store"
    shutil.copytree(ROOT / "tokenizers_store", store, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    ok = subprocess.run([sys.executable, "-m", "app", "verify", "--store", str(store)], capture_output=True,
                        text=True, timeout=120, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    victim = next(store.glob("*.tiktoken"))
    victim.write_bytes(victim.read_bytes()[:-10])
    bad = subprocess.run([sys.executable, "-m", "app", "verify", "--store", str(store)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert bad.returncode != 0 and victim.name in bad.stderr + bad.stdout
