"""Model slots: which provider and model answer a slot, from YAML and environment variables.

YAML (COVEL_GATEWAY_CONFIG):

    providers:
      openai:                      # any name; "scripted" is built in
        kind: openai-compatible    # the default kind for every name but "scripted"
        base_url: https://api.openai.com/v1
        api_key_env: OPENAI_API_KEY        # the key is read from this env var ...
        api_key_file: /run/secrets/openai  # ... or from this file (a mounted secret)
        stream_usage: true         # send stream_options.include_usage
        thinking: switchable       # its models think: "always", or "switchable" (off per call); unset: they do not
        thinking_off: {reasoning_effort: minimal}   # what a call with agent.reasoning: false adds (switchable)
        context_window: 128000     # its models' window in tokens: a larger request is not sent (context_window.py)
    slots:
      default: scripted            # "provider" or "provider:model"; used for unlisted slots
      story:
        provider: openai
        model: gpt-4o
        fallbacks: [gpt-4o-mini, "local:llama3"]   # same provider, or "provider:model"
      memory: openai:gpt-4o-mini

Environment variables win over the file: COVEL_GATEWAY_SLOTS (JSON slot -> "provider:model"),
and COVEL_GATEWAY_OPENAI_BASE_URL / _MODEL / _API_KEY_ENV / _API_KEY_FILE, which define the
provider "openai" and, with a model, make it the default slot (_EMBEDDING_MODEL: the slot
"embedding", which embeds and is never answered by the default chat slot). With no configuration at all
every slot resolves to the offline scripted provider.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from services.gateway.settings import GatewaySettings
from services.gateway.thinking import ThinkingConfigError, thinking_config
from shared.bounded_yaml import load_yaml
from shared.errors import failed_precondition

SCRIPTED = "scripted"
OPENAI_COMPATIBLE = "openai-compatible"
KINDS = (SCRIPTED, OPENAI_COMPATIBLE)
DEFAULT_SLOT = "default"
# The slot memory-search embeds with (services/gateway/embeddings.py); it never falls back to a chat model.
EMBEDDING_SLOT = "embedding"
WELL_KNOWN_SLOTS = ("story", "plugin", "memory", "fast")
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class SlotConfigError(ValueError):
    """The slot configuration cannot be used; raised at startup."""


def _thinking(mode: Any, off: Any, where: str) -> dict[str, Any]:
    try:
        return thinking_config(mode, off, where)
    except ThinkingConfigError as error:
        raise SlotConfigError(str(error)) from None


def _context_window(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SlotConfigError(f"{where} must be a positive number of tokens, not {value!r}")
    return value


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str = ""
    api_key_env: str = ""
    api_key_file: str = ""
    stream_usage: bool = True
    source: str = "default"
    # How its models think (services/gateway/thinking.py): "" (not at all, or not known), "always" or "switchable";
    # what a request that turns thinking off adds to its body (switchable only).
    thinking: str = ""
    thinking_off: dict[str, Any] = field(default_factory=dict)
    # Its models' context window in tokens (0: not known, never checked): a request larger than it is not sent
    # (services/gateway/context_window.py).
    context_window: int = 0

    def api_key(self) -> str | None:
        """The key, read now (so a rotated secret file is picked up); never log it."""
        if self.api_key_env:
            value = os.environ.get(self.api_key_env, "").strip()
            if value:
                return value
        if self.api_key_file:
            try:
                value = Path(self.api_key_file).read_text(encoding="utf-8").strip()
            except OSError:
                return None
            if value:
                return value
        return None

    def key_hint(self) -> str:
        """Where the key is looked for, for error messages (names, never values)."""
        places = []
        if self.api_key_env:
            places.append(f"env var {self.api_key_env}")
        if self.api_key_file:
            places.append(f"file {self.api_key_file}")
        return " or ".join(places) or "no key reference configured (api_key_env / api_key_file)"


@dataclass(frozen=True)
class Target:
    """One concrete model to try: the provider (with slot-level overrides applied) and model."""

    provider: ProviderConfig
    model: str
    # Its context window in tokens, as its slot's `context_window` says (0: its provider's, `window`).
    context_window: int = 0

    @property
    def window(self) -> int:
        """The model's context window in tokens: the slot's setting, else its provider's (0: not known)."""
        return self.context_window or self.provider.context_window

    @property
    def label(self) -> str:
        return f"{self.provider.name}:{self.model}"


@dataclass(frozen=True)
class SlotEntry:
    slot: str
    provider: str
    model: str
    fallbacks: tuple[str, ...] = ()
    base_url: str = ""
    api_key_env: str = ""
    api_key_file: str = ""
    source: str = "default"
    # The primary model's context window in tokens (0: not known).
    context_window: int = 0


@dataclass(frozen=True)
class Resolution:
    """What a request resolved to: the slot used and the models to try, in order."""

    slot: str
    chain: tuple[Target, ...]


@dataclass(frozen=True)
class SlotDescription:
    slot: str
    provider: str
    model: str
    base_url: str
    credentials_present: bool
    fallbacks: tuple[str, ...]
    source: str


def _split(spec: str) -> tuple[str, str]:
    provider, _, model = spec.strip().partition(":")
    return provider.strip(), model.strip()


def _slot_mapping(slot: str, spec: dict[str, Any], path: Path, source: str) -> SlotEntry:
    """A slot written as a mapping (provider, model, fallbacks, overrides, context_window)."""
    allowed = {"provider", "model", "fallbacks", "base_url", "api_key_env", "api_key_file", "context_window"}
    if set(spec) - allowed:
        raise SlotConfigError(f"{path}: slots.{slot}: unknown keys {sorted(set(spec) - allowed)}")
    fallbacks = spec.get("fallbacks") or []
    if isinstance(fallbacks, str) or not all(isinstance(item, str) for item in fallbacks):
        raise SlotConfigError(f"{path}: slots.{slot}.fallbacks must be a list of model names")
    provider = str(spec.get("provider") or "")
    if not provider:
        raise SlotConfigError(f"{path}: slots.{slot}.provider is required")
    window = spec.get("context_window", 0)
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= 100_000_000:
        raise SlotConfigError(f"{path}: slots.{slot}.context_window must be a whole number of tokens (0 to 100000000)")
    return SlotEntry(
        slot=str(slot),
        provider=provider,
        model=str(spec.get("model") or (SCRIPTED if provider == SCRIPTED else "")),
        fallbacks=tuple(fallbacks),
        base_url=str(spec.get("base_url") or ""),
        api_key_env=str(spec.get("api_key_env") or ""),
        api_key_file=str(spec.get("api_key_file") or ""),
        source=source,
        context_window=window,
    )


@dataclass
class SlotTable:
    providers: dict[str, ProviderConfig]
    slots: dict[str, SlotEntry]
    config_path: Path | None = None
    _where: str = field(default="", repr=False)

    # ---- building -------------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> SlotTable:
        providers: dict[str, ProviderConfig] = {SCRIPTED: ProviderConfig(SCRIPTED, SCRIPTED)}
        slots: dict[str, SlotEntry] = {}
        path = settings.gateway_config
        if path is not None:
            cls._load_yaml(Path(path), providers, slots)
        cls._apply_openai_env(settings, providers, slots)
        for slot, spec in settings.gateway_slots.items():
            slots[slot] = cls._entry(slot, spec, "env:COVEL_GATEWAY_SLOTS")
        if not slots and path is None:
            slots[DEFAULT_SLOT] = SlotEntry(DEFAULT_SLOT, SCRIPTED, SCRIPTED, source="default")
        table = cls(providers, slots, Path(path) if path else None)
        table._check()
        return table

    @staticmethod
    def _load_yaml(path: Path, providers: dict[str, ProviderConfig], slots: dict[str, SlotEntry]) -> None:
        source = f"yaml:{path}"
        try:
            data = load_yaml(path.read_text(encoding="utf-8")) or {}
        except OSError as error:
            raise SlotConfigError(f"COVEL_GATEWAY_CONFIG={path}: cannot read the file ({error.strerror})") from None
        except yaml.YAMLError as error:
            raise SlotConfigError(f"COVEL_GATEWAY_CONFIG={path}: not valid YAML ({error})") from None
        if not isinstance(data, dict):
            raise SlotConfigError(f"{path}: expected a mapping with providers: and slots:")
        unknown = set(data) - {"providers", "slots"}
        if unknown:
            raise SlotConfigError(f"{path}: unknown top-level keys {sorted(unknown)} (expected providers, slots)")
        for name, spec in (data.get("providers") or {}).items():
            if not isinstance(spec, dict):
                raise SlotConfigError(f"{path}: providers.{name} must be a mapping")
            allowed = {"kind", "base_url", "api_key_env", "api_key_file", "stream_usage", "thinking", "thinking_off", "context_window"}
            if set(spec) - allowed:
                raise SlotConfigError(f"{path}: providers.{name}: unknown keys {sorted(set(spec) - allowed)}")
            kind = spec.get("kind") or (SCRIPTED if name == SCRIPTED else OPENAI_COMPATIBLE)
            if kind not in KINDS:
                raise SlotConfigError(f"{path}: providers.{name}.kind must be one of {list(KINDS)}, not {kind!r}")
            providers[str(name)] = ProviderConfig(
                name=str(name),
                kind=kind,
                base_url=str(spec.get("base_url") or ""),
                api_key_env=str(spec.get("api_key_env") or ""),
                api_key_file=str(spec.get("api_key_file") or ""),
                stream_usage=bool(spec.get("stream_usage", True)),
                source=source,
                context_window=_context_window(spec.get("context_window"), f"{path}: providers.{name}.context_window"),
                **_thinking(spec.get("thinking"), spec.get("thinking_off"), f"{path}: providers.{name}"),
            )
        for slot, spec in (data.get("slots") or {}).items():
            if isinstance(spec, str):
                slots[str(slot)] = SlotTable._entry(str(slot), spec, source)
            elif isinstance(spec, dict):
                slots[str(slot)] = _slot_mapping(str(slot), spec, path, source)
            else:
                raise SlotConfigError(f"{path}: slots.{slot} must be 'provider:model' or a mapping")

    @staticmethod
    def _apply_openai_env(
        settings: GatewaySettings, providers: dict[str, ProviderConfig], slots: dict[str, SlotEntry]
    ) -> None:
        if not (settings.gateway_openai_base_url or settings.gateway_openai_model or settings.gateway_openai_embedding_model):
            return
        source = "env:COVEL_GATEWAY_OPENAI_*"
        existing = providers.get("openai")
        providers["openai"] = ProviderConfig(
            name="openai",
            kind=OPENAI_COMPATIBLE,
            base_url=settings.gateway_openai_base_url or (existing.base_url if existing else "") or OPENAI_DEFAULT_BASE_URL,
            api_key_env=settings.gateway_openai_api_key_env,
            api_key_file=str(settings.gateway_openai_api_key_file or (existing.api_key_file if existing else "")),
            stream_usage=existing.stream_usage if existing else True,
            source=source,
            context_window=settings.gateway_openai_context_window or (existing.context_window if existing else 0),
            **_thinking(settings.gateway_openai_thinking or None, settings.gateway_openai_thinking_off, "COVEL_GATEWAY_OPENAI"),
        )
        if settings.gateway_openai_model:
            slots[DEFAULT_SLOT] = SlotEntry(DEFAULT_SLOT, "openai", settings.gateway_openai_model, source=source)
        if settings.gateway_openai_embedding_model:
            slots[EMBEDDING_SLOT] = SlotEntry(EMBEDDING_SLOT, "openai", settings.gateway_openai_embedding_model, source=source)

    @staticmethod
    def _entry(slot: str, spec: str, source: str) -> SlotEntry:
        provider, model = _split(spec)
        return SlotEntry(slot, provider, model or (SCRIPTED if provider == SCRIPTED else ""), source=source)

    def _check(self) -> None:
        for entry in self.slots.values():
            where = entry.source.removeprefix("yaml:").removeprefix("env:")
            if entry.provider not in self.providers:
                raise SlotConfigError(
                    f"{where}: slot {entry.slot!r} names provider {entry.provider!r}, which is not configured "
                    f"(known: {sorted(self.providers)})"
                )
            if self.providers[entry.provider].kind == OPENAI_COMPATIBLE and not entry.model:
                raise SlotConfigError(f"{where}: slot {entry.slot!r} needs a model for provider {entry.provider!r}")
            for fallback in entry.fallbacks:
                self._fallback_target(entry, fallback)
        for provider in self.providers.values():
            if provider.kind == OPENAI_COMPATIBLE and not provider.base_url:
                raise SlotConfigError(f"{provider.source}: provider {provider.name!r} needs a base_url")

    # ---- resolving ------------------------------------------------------------------

    def where_to_configure(self, slot: str) -> str:
        file_hint = f"the YAML file {self.config_path}" if self.config_path else "a YAML file named by COVEL_GATEWAY_CONFIG"
        return (
            f"add slots.{slot} (or slots.default) to {file_hint}, "
            f"or set COVEL_GATEWAY_SLOTS='{{\"{slot}\": \"provider:model\"}}'"
        )

    def _provider_for(self, entry: SlotEntry) -> ProviderConfig:
        provider = self.providers[entry.provider]
        if not (entry.base_url or entry.api_key_env or entry.api_key_file):
            return provider
        return replace(
            provider,
            base_url=entry.base_url or provider.base_url,
            api_key_env=entry.api_key_env or provider.api_key_env,
            api_key_file=entry.api_key_file or provider.api_key_file,
        )

    def _fallback_target(self, entry: SlotEntry, spec: str) -> Target:
        provider, model = _split(spec)
        if model and provider in self.providers:
            return Target(self.providers[provider], model)
        if provider == SCRIPTED and not model:
            return Target(self.providers[SCRIPTED], SCRIPTED)
        return Target(self._provider_for(entry), spec.strip())

    def _chain(self, entry: SlotEntry) -> Resolution:
        primary = Target(self._provider_for(entry), entry.model, entry.context_window)
        return Resolution(entry.slot, (primary, *(self._fallback_target(entry, f) for f in entry.fallbacks)))

    def resolve(self, slot: str, model_override: str = "") -> Resolution:
        override = model_override.strip()
        if override:
            if override in self.slots:
                return self._chain(self.slots[override])
            provider, model = _split(override)
            if provider in self.providers:
                config = self.providers[provider]
                if not model and config.kind == SCRIPTED:
                    model = SCRIPTED
                if model:
                    return Resolution(slot or override, (Target(config, model),))
            raise failed_precondition(
                f"model_override {override!r} is neither a configured slot nor 'provider:model' with a configured "
                f"provider (providers: {', '.join(sorted(self.providers))}); {self.where_to_configure(override)}",
                reason="MODEL_NOT_CONFIGURED", subject=f"slots/{override}",
            )
        name = slot.strip() or DEFAULT_SLOT
        entry = self.slots.get(name) or self.slots.get(DEFAULT_SLOT)
        if entry is None:
            raise failed_precondition(
                f"model slot {name!r} is not configured and there is no default slot: {self.where_to_configure(name)}",
                reason="MODEL_NOT_CONFIGURED", subject=f"slots/{name}",
            )
        resolution = self._chain(entry)
        return Resolution(name, resolution.chain)

    def describe(self) -> list[SlotDescription]:
        names = list(self.slots)
        if DEFAULT_SLOT in self.slots:
            names += [slot for slot in WELL_KNOWN_SLOTS if slot not in self.slots]
        found = []
        for name in sorted(names):
            entry = self.slots.get(name) or self.slots[DEFAULT_SLOT]
            provider = self._provider_for(entry)
            found.append(
                SlotDescription(
                    slot=name,
                    provider=provider.name,
                    model=entry.model,
                    base_url=provider.base_url,
                    credentials_present=provider.api_key() is not None,
                    fallbacks=tuple(t.label for t in self._chain(entry).chain[1:]),
                    source=entry.source if name in self.slots else f"{entry.source} (via slot default)",
                )
            )
        return found


