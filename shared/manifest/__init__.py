"""Typed compiled manifests: the registry produces them, the scheduler and hooks read them.

On the wire they stay google.protobuf.Struct (RuntimeManifest.manifest, PluginPackage.definition)
so clients see no API change; the registry validates what it serves against these models, and
readers parse a package once per catalogue generation. See docs/plugins.md, "Compiled manifests".
"""

from shared.manifest.base import ManifestError, ManifestModel
from shared.manifest.package import PackageDefinition, Setting, parse_definition
from shared.manifest.runtime import CompiledManifest, HttpPermission, InputBinding, KernelInput, parse_manifest

__all__ = [
    "CompiledManifest",
    "HttpPermission",
    "InputBinding",
    "KernelInput",
    "ManifestError",
    "ManifestModel",
    "PackageDefinition",
    "Setting",
    "parse_definition",
    "parse_manifest",
]
