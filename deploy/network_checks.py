"""deploy/check.py's checks of the NetworkPolicies, against shared/security/policy.py: every covel pod's
ingress is denied by default and each service's gRPC port is open to exactly the services that may call
it (the scheduler's to everyone); the pods that run plugin code (hooks, scheduler) may connect only to
the services they call, and DNS (docs/security.md, "What plugin code can reach")."""

from __future__ import annotations

from typing import Any

SERVICES = ("registry", "scheduler", "hooks", "gateway", "store")


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        present = expression["key"] in labels
        inside = present and labels[expression["key"]] in expression.get("values", [])
        if {"In": not inside, "NotIn": inside, "Exists": not present, "DoesNotExist": present}[expression["operator"]]:
            return False
    return True


def _sources(peer: dict[str, Any]) -> set[str]:
    """The covel components a `from` entry admits; "outside" for anything beyond the namespace's covel pods."""
    if set(peer) != {"podSelector"}:
        return {"outside"}
    admitted = {service for service in SERVICES
                if _selects(peer["podSelector"], {"app.kubernetes.io/name": "covel", "app.kubernetes.io/component": service})}
    return admitted if admitted else {"outside"}


def reachable_from(policies: list[dict[str, Any]], service: str) -> set[str]:
    """Who may open a connection to `service`'s gRPC port: components, "outside", or "anyone"."""
    labels = {"app.kubernetes.io/name": "covel", "app.kubernetes.io/component": service}
    allowed: set[str] = set()
    for policy in policies:
        if not _selects(policy["spec"]["podSelector"], labels):
            continue
        for rule in policy["spec"].get("ingress", []):
            ports = [port.get("port") for port in rule.get("ports", [])]
            if ports and "grpc" not in ports:
                continue
            allowed |= {"anyone"} if "from" not in rule else set().union(*(_sources(peer) for peer in rule["from"]))
    return allowed


def expected_callers(service: str) -> set[str]:
    """The services shared/security/policy.py lets call `service` (operators reach it by port-forward)."""
    from shared.security import policy

    full_name = next(name for name in policy.POLICY if name.split(".")[1] == service)
    callers = set().union(*(rule.callers for rule in policy.POLICY[full_name].values()))
    return {"anyone"} if policy.CLIENT in callers else callers - {policy.OPERATOR}


# The services that run plugin code: their pods' egress is limited to their peers and DNS.
PLUGIN_HOSTS = ("hooks", "scheduler")


def reaches(policies: list[dict[str, Any]], service: str) -> set[str] | None:
    """The covel components `service`'s pods may connect to on their gRPC port ("outside" for other
    destinations but DNS), or None when no Egress policy selects them (they reach anything)."""
    labels = {"app.kubernetes.io/name": "covel", "app.kubernetes.io/component": service}
    selecting = [policy for policy in policies
                 if "Egress" in policy["spec"].get("policyTypes", []) and _selects(policy["spec"]["podSelector"], labels)]
    if not selecting:
        return None
    allowed: set[str] = set()
    for policy in selecting:
        for rule in policy["spec"].get("egress", []):
            ports = {port.get("port") for port in rule.get("ports", [])}
            if ports and ports <= {53}:
                continue  # DNS
            if "to" not in rule:
                allowed.add("anyone")
                continue
            allowed |= set().union(*(_sources(peer) for peer in rule["to"]))
    return allowed


def egress_problems(policies: list[dict[str, Any]]) -> list[str]:
    problems = []
    for service in PLUGIN_HOSTS:
        allowed = reaches(policies, service)
        expected = {callee for callee in SERVICES if service in expected_callers(callee)}
        if allowed is None:
            problems.append(f"NetworkPolicy: no Egress policy selects the {service} service's pods, which run plugin code")
        elif allowed != expected:
            problems.append(f"NetworkPolicy: the {service} service's pods may reach {sorted(allowed) or 'nobody'} besides DNS, "
                            f"shared/security/policy.py has it call {sorted(expected)}")
    return problems


def network_problems(policies: list[dict[str, Any]]) -> list[str]:
    deny_all = [p for p in policies if not p["spec"].get("ingress") and "Ingress" in p["spec"].get("policyTypes", [])
                and p["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "covel"}}]
    problems = [] if deny_all else ["no NetworkPolicy denies the covel pods' ingress by default (podSelector app.kubernetes.io/name: covel, no ingress rules)"]
    for service in SERVICES:
        allowed, expected = reachable_from(policies, service), expected_callers(service)
        if allowed != expected:
            problems.append(f"NetworkPolicy: the {service}'s gRPC port is open to {sorted(allowed) or 'nobody'}, "
                            f"shared/security/policy.py lets {sorted(expected)} call it")
    return problems + egress_problems(policies)
