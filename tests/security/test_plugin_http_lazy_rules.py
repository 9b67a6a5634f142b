"""covel.http given its declarations as a callable reads them once, on first use, not when it is made."""

from __future__ import annotations

from shared.plugin_sdk.http_client import PluginHttpClient


def test_callable_declarations_are_read_once_on_first_use() -> None:
    reads = []

    def declared():
        reads.append(1)
        return [("permissions.http[0]", {"origin": "https://api.example.com", "methods": ["GET"]})]

    client = PluginHttpClient("probe", declared)
    assert reads == []
    assert client.allows("GET", "https://api.example.com/x")
    assert not client.allows("POST", "https://api.example.com/x")
    assert [rule.origin for rule in client.rules] == ["https://api.example.com"]
    assert reads == [1]
