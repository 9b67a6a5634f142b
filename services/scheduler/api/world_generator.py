"""GenerateWorldData: the in-app world generator (spec: authoring, generate). Operators only.

Every loaded plugin's `contributes.data.<namespace>` that accepts a contract and declares `authoring.generate`
(`true`, or `{records: 1-20}`; default 3 records) is a target, one per contract (the first declaration by plugin id
and namespace). For each, the namespace's schema and the declaration's example are read from the package; then one
model call (slot `world-generator`, the schema as its response format) writes the records from the premise and the
declaration's title, summary and hint, and each record is checked against the schema. A schema or example that
cannot be read, a failed call or an answer that does not fit skips that contract only, named with the plugin,
namespace and reason in `skipped` and a `world_generator.skipped` log line; the others are generated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml
from jsonschema.exceptions import SchemaError

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import scheduler_pb2
from shared import json_schemas
from shared.errors import invalid_argument, permission_denied, rpc
from shared.logs import get_logger
from shared.security.auth import caller
from shared.structs import from_struct, to_struct

log = get_logger(component="scheduler.world_generator")
SLOT = "world-generator"
PREMISE_MAX = 4000
DEFAULT_RECORDS, MAX_RECORDS = 3, 20
SYSTEM = (
    'You write data for a world of interactive stories. Answer one JSON object {"records": [...]}, each record '
    "fitting the schema given, in the language asked for, consistent with the premise."
)


class Skip(Exception):
    """This contract cannot be generated: the reason."""


@dataclass(frozen=True)
class Target:
    contract: str
    plugin_id: str
    namespace: str
    root: Path
    declared: dict[str, Any]
    authoring: dict[str, Any]

    def count(self) -> int:
        generate = self.authoring.get("generate")
        records = generate.get("records") if isinstance(generate, dict) else None
        return (
            records
            if isinstance(records, int) and not isinstance(records, bool) and 1 <= records <= MAX_RECORDS
            else DEFAULT_RECORDS
        )


def targets(plugins: list[registry_pb2.PluginPackage], wanted: set[str]) -> Iterator[Target]:
    """One target per contract: the first generable declaration accepting it, by plugin id and namespace."""
    seen: set[str] = set()
    for package in sorted(plugins, key=lambda p: p.id):
        if package.state != registry_pb2.PLUGIN_STATE_LOADED:
            continue
        data = (from_struct(package.definition).get("contributes") or {}).get("data") or {}
        for namespace, declared in sorted(data.items()):
            authoring = declared.get("authoring") if isinstance(declared, dict) else None
            if not isinstance(authoring, dict) or authoring.get("generate") in (None, False):
                continue
            for contract in declared.get("accepts") or []:
                if contract not in seen and (not wanted or contract in wanted):
                    seen.add(contract)
                    yield Target(contract, package.id, namespace, Path(package.root_dir), declared, authoring)


def _package_file(target: Target, relative: str, what: str) -> Any:
    path = (target.root / relative).resolve()
    if not path.is_relative_to(target.root.resolve()):
        raise Skip(f"{what}: {relative} is outside the package")
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if relative.endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise Skip(f"{what}: {relative} cannot be read ({error})") from None


def prepared(target: Target) -> tuple[dict[str, Any], Any]:
    """The namespace's schema (checked as a JSON Schema) and the example (inline, or a package file; None)."""
    written = target.declared.get("schema")
    schema = _package_file(target, written, "schema") if isinstance(written, str) else written
    if not isinstance(schema, dict):
        raise Skip("schema: the namespace has no JSON Schema object")
    try:
        json_schemas.checked_validator(schema)
    except (SchemaError, json_schemas.PatternError) as error:
        raise Skip(f"schema: not a usable JSON Schema ({getattr(error, 'message', error)})") from None
    example = target.authoring.get("example")
    if isinstance(example, str) and example.endswith((".json", ".yaml", ".yml")):
        example = _package_file(target, example, "example")
    return schema, example


def _prompt(target: Target, premise: str, locale: str, example: Any) -> str:
    about = {key: target.authoring[key] for key in ("title", "summary", "hint") if isinstance(target.authoring.get(key), str)}
    lines = [
        f"Premise: {premise}",
        f"Write {target.count()} record(s) for {target.contract} ({target.plugin_id} · {target.namespace}).",
        f"Language: {locale or 'en'}.",
    ]
    lines += [f"{key.capitalize()}: {value}" for key, value in about.items()]
    if example is not None:
        lines.append(f"An example of the records: {json.dumps(example, ensure_ascii=False)}")
    return "\n".join(lines)


def checked_records(content: str, schema: dict[str, Any], count: int) -> list[dict[str, Any]]:
    try:
        answer = json.loads(content)
    except json.JSONDecodeError:
        raise Skip("the model's answer is not JSON") from None
    records = answer.get("records") if isinstance(answer, dict) else None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise Skip("the model's answer has no list of records")
    validator = json_schemas.validator(schema)
    for index, record in enumerate(records[:count]):
        errors = list(validator.iter_errors(record))
        if errors:
            raise Skip(f"records[{index}] does not fit the schema: {errors[0].message}")
    return records[:count]


class WorldGenerator:
    def __init__(self, registry: registry_pb2_grpc.PluginRegistryStub, gateway: gateway_pb2_grpc.LlmGatewayStub) -> None:
        self._registry, self._gateway = registry, gateway

    @rpc
    async def GenerateWorldData(
        self, request: scheduler_pb2.GenerateWorldDataRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GenerateWorldDataResponse:
        principal = caller()
        if not principal.is_operator:
            raise permission_denied("only an operator generates world data (it spends the operator's model keys)")
        if not request.premise.strip() or len(request.premise) > PREMISE_MAX:
            raise invalid_argument("premise", f"what the world is about, 1-{PREMISE_MAX} characters")
        plugins = (await self._registry.ListPlugins(registry_pb2.ListPluginsRequest(), timeout=10)).plugins
        reply = scheduler_pb2.GenerateWorldDataResponse()
        for target in targets(list(plugins), set(request.contracts)):
            try:
                records = await self._generate(target, request)
            except Skip as why:
                log.warning(
                    "world_generator.skipped",
                    contract=target.contract,
                    plugin_id=target.plugin_id,
                    namespace=target.namespace,
                    reason=str(why),
                    operator=principal.name,
                )
                reply.skipped.append(
                    scheduler_pb2.SkippedWorldData(
                        contract=target.contract, plugin_id=target.plugin_id, namespace=target.namespace, reason=str(why)
                    )
                )
                continue
            log.info(
                "world_generator.generated",
                contract=target.contract,
                plugin_id=target.plugin_id,
                namespace=target.namespace,
                records=len(records),
                operator=principal.name,
            )
            reply.data.append(
                scheduler_pb2.GeneratedWorldData(
                    contract=target.contract,
                    plugin_id=target.plugin_id,
                    namespace=target.namespace,
                    records=[to_struct(record) for record in records],
                )
            )
        return reply

    async def _generate(self, target: Target, request: scheduler_pb2.GenerateWorldDataRequest) -> list[dict[str, Any]]:
        schema, example = prepared(target)
        shape = {
            "type": "object",
            "required": ["records"],
            "additionalProperties": False,
            "properties": {"records": {"type": "array", "minItems": 1, "maxItems": target.count(), "items": schema}},
        }
        call = gateway_pb2.GenerateRequest(
            slot=SLOT,
            response_format=gateway_pb2.ResponseFormat(name=target.contract.replace("@", "-"), schema=to_struct(shape)),
            messages=[
                gateway_pb2.ChatMessage(role="system", content=SYSTEM),
                gateway_pb2.ChatMessage(role="user", content=_prompt(target, request.premise, request.locale, example)),
            ],
        )
        try:
            answer = await self._gateway.GenerateOnce(call, timeout=120)
        except grpc.aio.AioRpcError as error:
            raise Skip(f"the model call failed: {error.code().name} {error.details()}") from None
        if answer.finish_reason not in (gateway_pb2.FINISH_REASON_STOP, gateway_pb2.FINISH_REASON_UNSPECIFIED):
            raise Skip(f"the model call ended {gateway_pb2.FinishReason.Name(answer.finish_reason)}: {answer.error_message}")
        return checked_records(answer.message.content, schema, target.count())
