"""The offline scripted model: canned replies from a script file, else a valid automatic reply.

provider.py (the provider), canned_replies.py (the COVEL_GATEWAY_SCRIPT file), story_replies.py
(stories for narrative-engine@2), schema_instances.py (JSON satisfying a schema),
pattern_strings.py (strings matching a `pattern`).
"""

from services.gateway.providers.scripted.canned_replies import Script
from services.gateway.providers.scripted.provider import ScriptedProvider

__all__ = ["Script", "ScriptedProvider"]
