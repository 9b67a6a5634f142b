"""`make deploy-check` (deploy/check.py): the manifests render and pass, offline; and each of its
checks catches the mistake it is there for."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import subprocess
import sys

import pytest
import yaml

from shared.settings import REPO_ROOT

spec = importlib.util.spec_from_file_location("deploy_check", REPO_ROOT / "deploy" / "check.py")
deploy_check = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = deploy_check  # its dataclasses look their module up
spec.loader.exec_module(deploy_check)


def offline_prefix() -> list[str]:
    """`unshare -n`: run in a network namespace with no interfaces, where one can be made."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


def test_deploy_check_passes_without_network():
    result = subprocess.run(
        [*offline_prefix(), sys.executable, str(REPO_ROOT / "deploy" / "check.py")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "base " in result.stdout and "overlays/local " in result.stdout
    assert "✗" not in result.stdout


@pytest.fixture(scope="module")
def base_resources():
    return deploy_check.render(deploy_check.K8S_DIR / "base")


@pytest.fixture(scope="module")
def known():
    return deploy_check.known_variables()


def problems_of(resources, known, *, self_contained=False):
    rendered = deploy_check.Rendered("test", resources, self_contained)
    return deploy_check.consistency_problems(rendered, known, deploy_check.image_uid())


def deployment(resources, service):
    return next(r for r in resources if r["kind"] == "Deployment" and r["metadata"]["name"] == f"covel-{service}")


def container(resources, service):
    return deployment(resources, service)["spec"]["template"]["spec"]["containers"][0]


def test_base_is_consistent(base_resources, known):
    assert problems_of(base_resources, known) == []
    assert deployment(base_resources, "scheduler")["spec"]["replicas"] == 2


def test_unknown_field_fails_the_schema(base_resources):
    resources = copy.deepcopy(base_resources)
    container(resources, "gateway")["livenessProbe"]["grpcPort"] = 50153
    problems = deploy_check.schema_problems([deployment(resources, "gateway")], ("1.30.0",))
    assert any("grpcPort" in problem for problem in problems), problems


def test_grace_period_must_outlast_the_shutdown_grace(base_resources, known):
    resources = copy.deepcopy(base_resources)
    deployment(resources, "scheduler")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 60
    problems = problems_of(resources, known)
    assert any("terminationGracePeriodSeconds 60 must exceed preStop 5 s + shutdown budget 60 s (COVEL_SCHEDULER_DRAIN_S)" in p
               for p in problems), problems


def test_the_scheduler_drain_budget_comes_from_its_env_else_the_configmap_else_the_default(base_resources, known):
    resources = copy.deepcopy(base_resources)
    env = container(resources, "scheduler")["env"]
    env[:] = [item for item in env if item["name"] != "COVEL_SCHEDULER_DRAIN_S"]
    # No value anywhere: the setting's default (60 s) still fits 75 s.
    assert [p for p in problems_of(resources, known) if "covel-scheduler" in p] == []
    settings = next(r for r in resources if r["kind"] == "ConfigMap")["data"]
    settings["COVEL_SCHEDULER_DRAIN_S"] = "120"
    assert any("covel-scheduler: terminationGracePeriodSeconds 75 must exceed preStop 5 s + shutdown budget 120 s" in p
               for p in problems_of(resources, known))
    env.append({"name": "COVEL_SCHEDULER_DRAIN_S", "value": "30"})
    assert [p for p in problems_of(resources, known) if "covel-scheduler" in p] == []
    # The others' budget is COVEL_SHUTDOWN_GRACE_S: 45 s does not outlast 5 s + 40 s.
    settings["COVEL_SHUTDOWN_GRACE_S"] = "40"
    problems = problems_of(resources, known)
    assert sum("must exceed preStop 5 s + shutdown budget 40 s (COVEL_SHUTDOWN_GRACE_S)" in p for p in problems) == 4, problems


def test_a_misspelt_setting_and_a_probe_on_the_wrong_port_are_caught(base_resources, known):
    resources = copy.deepcopy(base_resources)
    container(resources, "store")["env"].append({"name": "COVEL_STORE_DATABASE_URI", "value": "x"})
    container(resources, "hooks")["readinessProbe"] = {"grpc": {"port": 50151}}
    problems = problems_of(resources, known)
    assert any("COVEL_STORE_DATABASE_URI is no setting of the store service" in p for p in problems), problems
    assert any("covel-hooks: readinessProbe should be a gRPC health probe on port 8081" in p for p in problems), problems


def test_an_overlay_must_bring_the_secrets_it_needs(base_resources, known):
    problems = problems_of(base_resources, known, self_contained=True)
    # The store's database URL is required; the provider keys and the API token are optional.
    assert problems == ["Deployment/covel-store: needs Secret 'covel-database', which this overlay does not create"]


def test_every_deployment_needs_a_disruption_budget(base_resources, known):
    resources = [r for r in base_resources if r["kind"] != "PodDisruptionBudget"]
    problems = problems_of(resources, known)
    for component in ("scheduler", "store", "registry", "hooks", "gateway", "web"):
        assert f"no PodDisruptionBudget for the {component} pods" in problems


def test_the_scaled_services_need_an_autoscaler_on_the_cpu_they_request(base_resources, known):
    resources = [r for r in copy.deepcopy(base_resources)
                 if not (r["kind"] == "HorizontalPodAutoscaler" and r["metadata"]["name"] == "covel-hooks")]
    del container(resources, "gateway")["resources"]["requests"]["cpu"]
    web = next(r for r in resources if r["kind"] == "HorizontalPodAutoscaler" and r["metadata"]["name"] == "covel-web")
    web["spec"]["minReplicas"] = 20
    problems = problems_of(resources, known)
    assert "no HorizontalPodAutoscaler for Deployment/covel-hooks" in problems
    assert "HorizontalPodAutoscaler/covel-gateway: its Deployment's containers must request cpu" in problems
    assert "HorizontalPodAutoscaler/covel-web: minReplicas must be 1..maxReplicas" in problems


def test_with_a_health_port_the_probes_must_use_it(base_resources, known):
    resources = copy.deepcopy(base_resources)
    container(resources, "gateway")["env"] = [{"name": "COVEL_GATEWAY_HEALTH_PORT", "value": "8082"}]
    problems = [p for p in problems_of(resources, known) if "covel-gateway" in p]
    assert [p.split(" should ")[0] for p in problems] == [
        f"Deployment/covel-gateway: {probe}" for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    ]
    assert all("a gRPC health probe on port 8082" in p for p in problems), problems
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container(resources, "gateway")[probe]["grpc"]["port"] = 8082
    assert [p for p in problems_of(resources, known) if "covel-gateway" in p] == []


def test_each_service_mounts_its_own_certificate_and_probes_the_health_port(base_resources, known):
    """mTLS is not optional: the base gives every pod its own Secret, where COVEL_TLS_* point."""
    settings = next(r for r in base_resources if r["kind"] == "ConfigMap")["data"]
    assert settings["COVEL_HEALTH_PORT"] == "8081" and settings["COVEL_TLS_CA_FILE"] == "/var/lib/covel/pki/ca.crt"
    for service in deploy_check.SERVICES:
        pod = deployment(base_resources, service)["spec"]["template"]["spec"]
        assert {"name": "tls", "secret": {"secretName": f"covel-{service}-tls", "defaultMode": 0o440}} in pod["volumes"]
        assert container(base_resources, service)["readinessProbe"]["grpc"]["port"] == 8081
    scheduler_env = {item["name"]: item.get("value") for item in container(base_resources, "scheduler")["env"]}
    assert scheduler_env["COVEL_TLS_REQUIRE_CLIENT_CERT"] == "false"


def test_another_services_certificate_or_none_is_caught(base_resources, known):
    resources = copy.deepcopy(base_resources)
    deployment(resources, "hooks")["spec"]["template"]["spec"]["volumes"].append(
        {"name": "stolen", "secret": {"secretName": "covel-scheduler-tls"}})
    gateway_pod = deployment(resources, "gateway")["spec"]["template"]["spec"]
    gateway_pod["volumes"] = [v for v in gateway_pod["volumes"] if v["name"] != "tls"]
    gateway_pod["containers"][0]["volumeMounts"] = [m for m in gateway_pod["containers"][0]["volumeMounts"] if m["name"] != "tls"]
    problems = problems_of(resources, known)
    assert "Deployment/covel-hooks: mounts covel-scheduler-tls, another service's certificate and key" in problems
    assert any(p.startswith("Deployment/covel-gateway: does not mount its certificate, Secret covel-gateway-tls") for p in problems)


def test_network_policies_follow_the_caller_policy(base_resources, known):
    assert [p for p in problems_of(base_resources, known) if "NetworkPolicy" in p] == []
    resources = copy.deepcopy(base_resources)
    store = next(r for r in resources if r["kind"] == "NetworkPolicy" and r["metadata"]["name"] == "covel-store")
    store["spec"]["ingress"][0]["from"].append({"podSelector": {"matchLabels": {"app.kubernetes.io/component": "gateway"}}})
    resources = [r for r in resources if r["metadata"]["name"] != "covel-default-deny"]
    problems = [p for p in problems_of(resources, known) if "NetworkPolicy" in p]
    assert problems == [
        "no NetworkPolicy denies the covel pods' ingress by default (podSelector app.kubernetes.io/name: covel, no ingress rules)",
        "NetworkPolicy: the store's gRPC port is open to ['gateway', 'hooks', 'scheduler'], shared/security/policy.py lets ['hooks', 'scheduler'] call it",
    ]


def test_a_mount_of_a_volume_the_pod_lacks_is_caught(base_resources, known):
    resources = copy.deepcopy(base_resources)
    container(resources, "hooks")["volumeMounts"].append({"name": "plugins", "mountPath": "/var/lib/covel/plugins"})
    assert "Deployment/covel-hooks: mounts volume 'plugins', which the pod does not have" in problems_of(resources, known)


def test_the_web_front_runs_web_behind_its_service_with_http_probes(base_resources, known):
    resources = copy.deepcopy(base_resources)
    web = container(resources, "web")
    assert web["args"] == ["web"] and deployment(resources, "web")["spec"]["template"]["spec"]["volumes"][1]["secret"]["items"] == [
        {"key": "ca.crt", "path": "ca.crt"}], "the web front mounts the CA, never the scheduler's key"
    web["args"] = ["scheduler"]
    web["readinessProbe"] = {"grpc": {"port": 8081}}
    web["env"].append({"name": "COVEL_WEB_PORT", "value": "80"})
    problems = problems_of(resources, known)
    assert "Deployment/covel-web: args ['scheduler'] should be ['web']" in problems
    assert "Deployment/covel-web: readinessProbe should be an HTTP probe (/healthz, /readyz)" in problems
    assert "Deployment/covel-web: COVEL_WEB_PORT is no setting of the web front" in problems
    without = [r for r in resources if r["metadata"]["name"] != "covel-web" or r["kind"] != "Deployment"]
    assert "Deployment/covel-web: missing (the web front, docs/web.md)" in problems_of(without, known)


def test_the_store_migrates_in_its_init_container_and_only_checks(base_resources, known):
    resources = copy.deepcopy(base_resources)
    pod = deployment(resources, "store")["spec"]["template"]["spec"]
    pod["initContainers"] = []
    container(resources, "store")["env"] = [item for item in container(resources, "store")["env"] if item["name"] != "COVEL_STORE_MIGRATE"]
    problems = problems_of(resources, known)
    assert "Deployment/covel-store: no init container runs `store-migrate` (the schema migration)" in problems
    assert any(p.startswith("Deployment/covel-store: set COVEL_STORE_MIGRATE=check") for p in problems)


def test_a_service_monitor_is_checked_against_its_crd_schema():
    monitor = yaml.safe_load((deploy_check.K8S_DIR / "components" / "service-monitor" / "service-monitor.yaml").read_text())
    assert deploy_check.schema_problems([monitor]) == []
    monitor["spec"]["endpoints"][0]["interval"] = "soon"
    monitor["spec"]["endpoint"] = []
    problems = deploy_check.schema_problems([monitor])
    assert any("spec/endpoints/0/interval" in p for p in problems) and any("'endpoint' was unexpected" in p for p in problems), problems


def test_plugins_reach_every_pod_read_only(base_resources, known):
    resources = copy.deepcopy(base_resources)
    hooks = deployment(resources, "hooks")["spec"]["template"]["spec"]
    hooks["volumes"].append({"name": "plugins", "persistentVolumeClaim": {"claimName": "covel-plugins"}})
    hooks["containers"][0]["volumeMounts"].append({"name": "plugins", "mountPath": "/app/plugins"})
    problems = problems_of(resources, known)
    assert any(p.startswith("Deployment/covel-hooks: plugin folder /app/plugins is on volume plugins, mounted writable") for p in problems)


def test_every_stage_of_the_image_starts_from_a_base_pinned_by_digest():
    assert deploy_check.base_image_problems((REPO_ROOT / "deploy" / "Dockerfile").read_text()) == []
    digest = "0" * 64
    pinned = f"ARG BASE=python:3.11-slim@sha256:{digest}\nFROM ${{BASE}} AS build\nFROM build\nFROM debian:13@sha256:{digest}\n"
    assert deploy_check.base_image_problems(pinned) == []
    tagged = "ARG BASE=python:3.11-slim\nFROM ${BASE} AS build\nFROM python:3.11-slim\n"
    assert deploy_check.base_image_problems(tagged) == [
        "FROM ${BASE} is not pinned by digest; write <image>@sha256:<digest>",
        "FROM python:3.11-slim is not pinned by digest; write <image>@sha256:<digest>"]


def test_the_pods_that_run_plugin_code_reach_only_their_peers_and_dns(base_resources, known):
    resources = copy.deepcopy(base_resources)
    hooks = next(r for r in resources if r["kind"] == "NetworkPolicy" and r["metadata"]["name"] == "covel-hooks-egress")
    # An egress rule to anywhere (a database, the metadata address) is caught; so is a pod no Egress policy selects.
    hooks["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 5432}]})
    resources = [r for r in resources if r["metadata"]["name"] != "covel-scheduler-egress"]
    problems = [p for p in problems_of(resources, known) if "NetworkPolicy" in p]
    assert problems == [
        "NetworkPolicy: the hooks service's pods may reach ['outside', 'registry', 'store'] besides DNS, "
        "shared/security/policy.py has it call ['registry', 'store']",
        "NetworkPolicy: no Egress policy selects the scheduler service's pods, which run plugin code",
    ]


OPS = deploy_check.OPS


def test_an_image_not_pinned_by_digest_is_caught(base_resources):
    resources = copy.deepcopy(base_resources)
    assert OPS.image_problems(resources) == []
    deployment(resources, "store")["spec"]["template"]["spec"]["initContainers"][0]["image"] = "postgres:17-alpine"
    assert OPS.image_problems(resources) == [
        "Deployment/covel-store: image postgres:17-alpine is not pinned by digest; write <image>@sha256:<digest>"]


def test_what_a_turn_needs_stays_up_through_a_drain(base_resources):
    resources = copy.deepcopy(base_resources)
    assert OPS.disruption_problems(resources, base=True) == []
    [budget] = [r for r in resources if r["kind"] == "PodDisruptionBudget" and r["metadata"]["name"] == "covel-gateway"]
    budget["spec"] = {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}
    deployment(resources, "hooks")["spec"]["replicas"] = 1
    [scaler] = [r for r in resources if r["kind"] == "HorizontalPodAutoscaler" and r["metadata"]["name"] == "covel-hooks"]
    scaler["spec"]["minReplicas"] = 1
    assert OPS.disruption_problems(resources, base=True) == [
        "Deployment/covel-hooks: run two replicas or more (and an autoscaler minimum of two): a turn needs it",
        "the gateway pods' PodDisruptionBudget must keep one up (minAvailable: 1): a turn needs them",
    ]
    # An overlay may run one replica (a laptop); its budget still keeps that one up.
    assert OPS.disruption_problems(resources, base=False) == [
        "the gateway pods' PodDisruptionBudget must keep one up (minAvailable: 1): a turn needs them"]


def test_the_alert_rules_and_dashboard_are_checked(tmp_path):
    assert OPS.monitoring_problems() == []
    for name in ("alerts.yaml", "alerts.test.yaml", "grafana-dashboard.json"):
        shutil.copy(OPS.MONITORING / name, tmp_path / name)
    rules = (tmp_path / "alerts.yaml").read_text()
    # A misspelt metric; an alert whose threshold no longer fires where its unit test expects it.
    (tmp_path / "alerts.yaml").write_text(rules.replace("covel_detached_oldest_queued_seconds", "covel_detached_oldest_seconds"))
    problems = OPS.monitoring_problems(tmp_path)
    assert any(p.startswith("alerts.yaml CovelDetachedQueueStuck: covel_detached_oldest_seconds is no metric") for p in problems), problems
    (tmp_path / "alerts.yaml").write_text(rules.replace("> 0.05", "> 0.5"))
    [problem] = OPS.monitoring_problems(tmp_path)
    assert problem.startswith("promtool test rules alerts.test.yaml: ") and "CovelTurnsFailing" in problem, problem
    (tmp_path / "alerts.yaml").write_text(rules.replace("expr: max(covel_detached_jobs", "expr: max(covel_detached_jobs[", 1))
    assert any(p.startswith("promtool check rules alerts.yaml: ") for p in OPS.monitoring_problems(tmp_path))
