"""Values both sides compare by identity or type: a hookspec's answer that was not given, and whose calls a
hookspec adapter keeps."""

from __future__ import annotations

from covel.hooks.v1 import hooks_pb2
from shared.plugin_sdk import HookContext

# A replacement not given (a hook raised, or no replace decision for the call).
MISSING = object()

# Whose calls these are: a handler's ctx, or a CallTool request's HookContext (turn, runtime, execution of the call).
CallContext = HookContext | hooks_pb2.HookContext
