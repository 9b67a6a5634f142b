"""The wire's generated tables: docs/retries.md's deadline and retry rule of each method our channels
call (shared/grpc_client.py), docs/security.md's who may call what (shared/security/policy.py), and
docs/api.md's enums of the public API (protos/covel/scheduler/v1).
"""

from __future__ import annotations

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from shared import grpc_client
from shared.error_reasons import REASONS
from shared.security import policy

# ----- channels: deadlines and retries (shared/grpc_client.py) -------------------------------


def _deadline_cell(deadline: grpc_client.Deadline) -> str:
    if deadline.seconds is None:
        return f"none ({deadline.bounds})"
    return f"{deadline.seconds:g} s ({deadline.bounds})"


def _retry_cell(service: str, method: str, streamed: bool) -> str:
    if not grpc_client.retry_safe(service, method):
        return "no"
    if f"{service}/{method}" in grpc_client.IDEMPOTENT_WRITES:
        return f"yes: {grpc_client.IDEMPOTENT_WRITES[f'{service}/{method}']}"
    return "yes: a read (a stream only until its first message)" if streamed else "yes: a read"


def channel_rules_table() -> str:
    """Per target service: each method's deadline and whether a channel re-sends it on UNAVAILABLE."""
    parts = []
    for service in grpc_client.DEADLINES:
        rows = [f"**`{service}`**", "", "| method | deadline | re-sent on `UNAVAILABLE` |", "|---|---|---|"]
        for method_service, method, streamed in grpc_client.proto_methods():
            if method_service == service:
                deadline = _deadline_cell(grpc_client.deadline_of(service, method))
                rows.append(f"| `{method}` | {deadline} | {_retry_cell(service, method, streamed)} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


# ----- who may call what (shared/security/policy.py) ------------------------------------------


def service_policy_table() -> str:
    """Per service, its methods grouped by who may call them, and why."""
    rows = ["| service | methods | who may call them | why |", "|---|---|---|---|"]
    for service, methods in policy.POLICY.items():
        groups: dict[policy.Rule, list[str]] = {}
        for method, rule in methods.items():
            groups.setdefault(rule, []).append(method)
        for rule, names in groups.items():
            callers = ", ".join(f"`{caller}`" for caller in sorted(rule.callers))
            listed = "every method ([api.md](api.md))" if service == policy.CLIENT_API else ", ".join(f"`{name}`" for name in names)
            rows.append(f"| `{service.rsplit('.', 1)[1]}` | {listed} | {callers} | {rule.why} |")
    return "\n".join(rows) + "\n"


# ----- the public API's enums (protos/covel/scheduler/v1) ------------------------------------------


def public_enums_table() -> str:
    """Each enum of the public package, its values (UNSPECIFIED left out) and the fields that hold it."""
    files = (resources_pb2.DESCRIPTOR, scheduler_pb2.DESCRIPTOR)
    holders: dict[str, list[str]] = {}
    for file in files:
        for message in file.message_types_by_name.values():
            for field in message.fields:
                if field.enum_type is not None:
                    holders.setdefault(field.enum_type.name, []).append(f"`{message.name}.{field.name}`")
    rows = ["| enum | values | held by |", "|---|---|---|"]
    for enum in resources_pb2.DESCRIPTOR.enum_types_by_name.values():
        values = ", ".join(f"`{value.name}`" for value in enum.values if value.number)
        rows.append(f"| `{enum.name}` | {values} | {', '.join(holders.get(enum.name, []))} |")
    return "\n".join(rows) + "\n"


# ----- the stable reasons of ErrorInfo (shared/error_reasons.py) -----------------------------------


def error_reasons_table() -> str:
    """Each reason of shared/error_reasons.py: its status code, the details that come with it, what it means."""
    rows = ["| reason | code | with | meaning |", "|---|---|---|---|"]
    for name, reason in sorted(REASONS.items(), key=lambda item: (item[1].code.name, item[0])):
        rows.append(f"| `{name}` | `{reason.code.name}` | {reason.details} | {reason.meaning} |")
    return "\n".join(rows) + "\n"
