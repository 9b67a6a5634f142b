"""Every NOT_FOUND a service raises names its resource (google.rpc.ResourceInfo) and a reason, every
FAILED_PRECONDITION its reason (google.rpc.PreconditionFailure): read from the code itself, so a new raise
without them fails here (docs/api.md, "Errors")."""

from __future__ import annotations

import ast

from shared.settings import REPO_ROOT

ROOTS = ("services", "shared")


def _calls(name: str) -> list[tuple[str, ast.Call]]:
    found = []
    for root in ROOTS:
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            if "gen" in path.relative_to(REPO_ROOT).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                    found.append((f"{path.relative_to(REPO_ROOT)}:{node.lineno}", node))
    return found


def _keywords(call: ast.Call) -> set[str]:
    return {keyword.arg for keyword in call.keywords if keyword.arg}


def test_every_not_found_names_its_resource_and_reason() -> None:
    missing = [where for where, call in _calls("not_found")
               if not (len(call.args) >= 3 or {"resource_type", "resource_name"} <= _keywords(call)) or "reason" not in _keywords(call)]
    assert missing == [], f"not_found(message, resource_type, resource_name, reason=...) at: {missing}"


def test_every_failed_precondition_names_its_reason() -> None:
    missing = [where for where, call in _calls("failed_precondition") if "reason" not in _keywords(call) and len(call.args) < 2]
    assert missing == [], f"failed_precondition(message, reason=..., subject=...) at: {missing}"


def test_the_audit_sees_the_raises() -> None:
    assert len(_calls("not_found")) > 10 and len(_calls("failed_precondition")) > 20
