"""Catalogue objects as registry protos."""

from __future__ import annotations

from covel.registry.v1 import registry_pb2
from services.registry.loaded_package import LoadedPackage
from services.registry.runtime_compiler import CompiledRuntime
from services.registry.session_resolution import ConfirmedResolution, Rejection, Resolution
from shared.structs import to_struct


def runtime_to_proto(runtime: CompiledRuntime) -> registry_pb2.RuntimeManifest:
    return registry_pb2.RuntimeManifest(
        runtime_id=runtime.runtime_id,
        plugin_id=runtime.plugin_id,
        type=runtime.type,
        stage=runtime.stage,
        visibility=runtime.visibility,
        prompt=runtime.prompt,
        prompt_variants=runtime.prompt_variants,
        manifest=to_struct(runtime.compiled.to_json() if runtime.compiled else runtime.manifest),
    )


def package_to_proto(package: LoadedPackage) -> registry_pb2.PluginPackage:
    return registry_pb2.PluginPackage(
        id=package.id,
        kind=package.kind,
        version=package.version,
        display_name=package.display_name,
        description=package.description,
        tags=package.tags,
        provides=package.provides,
        requires=package.requires,
        root_dir=str(package.root_dir),
        entry=package.entry,
        hooks=[registry_pb2.DeclaredHook(event=event, enforce=enforce) for event, enforce in package.hooks],
        runtimes=[runtime_to_proto(runtime) for runtime in package.runtimes],
        # A failed package has no typed definition: it is listed as compiled, for its diagnostics.
        definition=to_struct(package.compiled_definition.to_json() if package.compiled_definition else package.definition),
        state=registry_pb2.PLUGIN_STATE_LOADED if package.loaded else registry_pb2.PLUGIN_STATE_FAILED,
        diagnostics=[diagnostic.to_proto() for diagnostic in package.diagnostics],
        source=package.source,
        default_provides=package.default_provides,
        conflicts=package.conflicts,
        tools=package.tools,
        actions=package.actions,
        services=package.services,
        extensions=package.extensions,
        forms=package.forms,
        event_topics=package.event_topics,
        ui_panels=[registry_pb2.UiPanelSpec(location=location, file=file, spec=to_struct(spec)) for location, file, spec in package.ui_panels],
    )


def rejection_to_proto(rejection: Rejection) -> registry_pb2.RejectedPlugin:
    return registry_pb2.RejectedPlugin(
        plugin_id=rejection.plugin_id,
        code=rejection.code,
        reason=rejection.reason,
        contract=rejection.contract,
        topic=rejection.topic,
    )


def resolution_to_proto(resolution: Resolution, generation: int) -> registry_pb2.ResolveSessionPluginsResponse:
    return registry_pb2.ResolveSessionPluginsResponse(
        active=resolution.active,
        session_plugins=resolution.session_plugins,
        auto_added=resolution.auto_added,
        rejected=[rejection_to_proto(rejection) for rejection in resolution.rejected],
        generation=generation,
        unavailable=[rejection_to_proto(rejection) for rejection in resolution.unavailable],
        unmet=[
            registry_pb2.UnmetRequirement(contract=item.contract, code=item.code, reason=item.reason, providers=item.providers)
            for item in resolution.unmet
        ],
    )


def confirmed_to_proto(resolution: ConfirmedResolution, generation: int) -> registry_pb2.ResolveConfirmedSessionPluginsResponse:
    return registry_pb2.ResolveConfirmedSessionPluginsResponse(
        runnable=resolution.runnable,
        unavailable=[rejection_to_proto(rejection) for rejection in resolution.unavailable],
        generation=generation,
    )
