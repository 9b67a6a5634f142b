"""The building blocks of the author format's models: the strict base model, the scalar-or-object
unions, and the checked field types (contract ids, hook event names, action names, https links)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic_core import PydanticCustomError

from shared.hook_events import EVENTS_BY_NAME

PLUGIN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
CONTRACT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*@[0-9]+$")
RESERVED_PLUGIN_IDS = frozenset({"framework"})
RESERVED_ACTION_PREFIXES = ("covel:", "runtime:", "event:")
STAGES = ("setup", "pre-turn", "narrative", "post-turn", "audit")
# Kernel extension points: contracts the kernel composes itself (by their mode), not plugin contracts.
KERNEL_EXTENSION_POINTS = frozenset(
    {"prompt.segment@1", "session.world-context@1", "prompt.history-transform@1", "history.compact@2"}
)
# The points with one provider per session (their mode is single; the others combine every provider): two active
# plugins with an extension of one conflict, and a core plugin's is only the default (a requested plugin's replaces it).
SINGLE_PROVIDER_POINTS = frozenset({"history.compact@2"})
BASE_ACTION_KINDS = frozenset({"say", "act", "narrate", "direct", "advance", "command"})
DATASET_OPS = ("set", "merge", "inc", "append", "insert", "remove", "upsertItem", "delete")
DATASET_TOOLS = ("get", "list", "upsert", "update")

Stage = Literal["setup", "pre-turn", "narrative", "post-turn", "audit"]
Cardinality = Literal["one", "all"]
Visibility = Literal["story", "system"]
TriggerType = Literal["auto", "manual", "event"]
LoopProfile = Literal["story", "actor", "system"]


class Strict(BaseModel):
    """A known group: unknown keys are errors naming the key."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())


def _shape(*, scalar: type | tuple[type, ...]) -> Any:
    def pick(value: Any) -> str:
        return "scalar" if isinstance(value, scalar) else "object"

    return Discriminator(pick)


def either(scalar: Any, scalar_type: type | tuple[type, ...], obj: type[BaseModel]) -> Any:
    """`scalar` when the author wrote a scalar (string/bool), else the object form."""
    return Annotated[
        Annotated[scalar, Tag("scalar")] | Annotated[obj, Tag("object")],
        _shape(scalar=scalar_type),
    ]


# ----- checks shared by several fields ---------------------------------------------------------


def _contract_id(value: str) -> str:
    if not CONTRACT_ID.match(value):
        raise PydanticCustomError(
            "invalid-contract-id",
            "`{value}` is not a contract id: write a versioned name such as narrative-engine@2",
            {"value": value},
        )
    return value


def _hook_event(value: str) -> str:
    if value not in EVENTS_BY_NAME:
        raise PydanticCustomError(
            "unknown-hook-event",
            "`{value}` is not a hook event; one of: {events}",
            {"value": value, "events": ", ".join(EVENTS_BY_NAME)},
        )
    return value


def _action_name(value: str) -> str:
    if not value:
        raise PydanticCustomError("invalid-action", "an action name must not be empty")
    if value.startswith(RESERVED_ACTION_PREFIXES):
        raise PydanticCustomError(
            "reserved-action-prefix",
            "`{value}`: the prefixes covel:, runtime: and event: are reserved for the framework",
            {"value": value},
        )
    return value


def _https_link(value: str) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        raise PydanticCustomError(
            "insecure-link",
            "`{value}`: links must be https:// addresses (http:, javascript:, file: and the like are rejected)",
            {"value": value},
        )
    if parts.username is not None or parts.password is not None:
        raise PydanticCustomError(
            "insecure-link", "`{value}`: a link cannot carry a user name or password", {"value": value}
        )
    return value


ContractId = Annotated[str, AfterValidator(_contract_id)]
HttpsLink = Annotated[str, Field(min_length=1), AfterValidator(_https_link)]
HookEventName = Annotated[str, AfterValidator(_hook_event)]
ActionName = Annotated[str, AfterValidator(_action_name)]
NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
