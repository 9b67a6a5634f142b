"""deploy-check's operator checks (deploy/check.py loads this file beside it):

- every container image of every rendered set is the covel image (its tag set by kustomize `images:`) or pinned by
  digest (`<image>@sha256:<64 hex>`);
- what a turn needs (MUST_STAY_UP) keeps one pod through a drain: its PodDisruptionBudget has `minAvailable` >= 1,
  and in the base it runs two replicas or more (its Deployment, and its autoscaler's minimum where it has one);
- the monitoring component's alert rules and dashboard name only metrics the services export
  (shared/telemetry/metrics.py), `promtool check rules` accepts the rules and `promtool test rules` passes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import Counter, Gauge, Histogram

from shared.telemetry import metrics

MUST_STAY_UP = ("scheduler", "store", "hooks", "gateway", "web")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
MONITORING = Path(__file__).resolve().parent / "k8s" / "components" / "monitoring"
# A PromQL metric name followed by a selector or a range, and bare names inside functions: all names starting so.
METRIC_NAME = re.compile(r"\b((?:covel|grpc_server)_[a-z0-9_]+)\b")


def _containers(resource: dict[str, Any]) -> list[dict[str, Any]]:
    spec = resource.get("spec", {})
    pod = spec.get("template", {}).get("spec", {}) if "template" in spec else spec if resource["kind"] == "Pod" else {}
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def image_problems(resources: list[dict[str, Any]]) -> list[str]:
    problems = []
    for resource in resources:
        for container in _containers(resource):
            image = container.get("image", "")
            if image.split(":")[0] != "covel" and not DIGEST.search(image):
                problems.append(f"{resource['kind']}/{resource['metadata']['name']}: image {image} is not pinned by digest;"
                                " write <image>@sha256:<digest>")
    return problems


def disruption_problems(resources: list[dict[str, Any]], *, base: bool) -> list[str]:
    problems = []
    budgets = {pdb["spec"]["selector"].get("matchLabels", {}).get("app.kubernetes.io/component"): pdb["spec"]
               for pdb in resources if pdb["kind"] == "PodDisruptionBudget"}
    scalers = {hpa["spec"]["scaleTargetRef"]["name"]: hpa["spec"] for hpa in resources if hpa["kind"] == "HorizontalPodAutoscaler"}
    deployments = {d["metadata"]["name"]: d["spec"] for d in resources if d["kind"] == "Deployment"}
    for component in MUST_STAY_UP:
        budget = budgets.get(component, {})
        if not isinstance(budget.get("minAvailable"), int) or budget["minAvailable"] < 1:
            problems.append(f"the {component} pods' PodDisruptionBudget must keep one up (minAvailable: 1): a turn needs them")
        name = f"covel-{component}"
        if base and name in deployments:
            least = scalers[name].get("minReplicas", 1) if name in scalers else deployments[name].get("replicas", 1)
            if min(least, deployments[name].get("replicas", 1)) < 2:
                problems.append(f"Deployment/{name}: run two replicas or more (and an autoscaler minimum of two): a turn needs it")
    return problems


def exported_metrics() -> set[str]:
    """The series names the services export: counters as <name>_total, histograms as _bucket/_count/_sum."""
    names = set()
    for value in vars(metrics).values():
        if isinstance(value, Counter):
            names.add(f"{value._name}_total")
        elif isinstance(value, Histogram):
            names.update(f"{value._name}{suffix}" for suffix in ("_bucket", "_count", "_sum"))
        elif isinstance(value, Gauge):
            names.add(value._name)
    return names


def _expressions(folder: Path) -> list[tuple[str, str]]:
    """(where, PromQL) of every alert rule and dashboard target."""
    found = []
    rules = yaml.safe_load((folder / "alerts.yaml").read_text(encoding="utf-8"))
    for group in rules["groups"]:
        found += [(f"alerts.yaml {rule.get('alert') or rule.get('record')}", rule["expr"]) for rule in group["rules"]]
    dashboard = json.loads((folder / "grafana-dashboard.json").read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        found += [(f"grafana-dashboard.json panel {panel['title']!r}", target["expr"]) for target in panel.get("targets", [])]
    return found


def monitoring_problems(folder: Path = MONITORING, promtool: str | None = None) -> list[str]:
    known = exported_metrics()
    problems = [f"{where}: {name} is no metric the services export (shared/telemetry/metrics.py)"
                for where, expr in _expressions(folder) for name in METRIC_NAME.findall(expr) if name not in known]
    promtool = promtool or shutil.which("promtool")
    if promtool is None:
        return problems + ["promtool not found: `make deploy-check` installs it (Debian's prometheus package)"]
    for command in (["check", "rules", "alerts.yaml"], ["test", "rules", "alerts.test.yaml"]):
        done = subprocess.run([promtool, *command], cwd=folder, capture_output=True, text=True, timeout=60)
        if done.returncode:
            problems.append(f"promtool {' '.join(command)}: " + (done.stdout + done.stderr).strip().replace("\n", " | ")[:2000])
    return problems
