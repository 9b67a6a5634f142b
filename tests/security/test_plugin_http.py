"""covel.http against real local HTTP servers: declared origins and methods only, checked before sending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from services.hooks.server import start as start_hooks
from services.hooks.settings import HooksSettings
from services.registry.server import start as start_registry
from services.registry.settings import RegistrySettings
from shared.manifest.runtime import Permissions
from shared.plugin_sdk.http_client import (
    HttpPermissionDenied,
    PluginHttpClient,
    declared_http_permissions,
    invalid_http_permissions,
)
from tests.conftest import free_addr
from tests.security.http_site import Site
from tests.support.identities import channel_as, service_tls


@pytest.fixture(scope="module")
def sites():
    declared, undeclared = Site(), Site()
    yield declared, undeclared
    declared.close()
    undeclared.close()


def client_for(site: Site, methods=None) -> PluginHttpClient:
    entry = {"origin": site.origin} | ({"methods": methods} if methods is not None else {})
    return PluginHttpClient("probe", [("permissions.http[0]", entry)])


async def test_a_declared_request_goes_through(sites):
    declared, _ = sites
    client = client_for(declared, ["GET"])
    try:
        reply = await client.get(f"{declared.origin}/words?q=tide")
        assert reply.status_code == 200
        assert reply.json() == {"method": "GET", "path": "/words?q=tide"}
    finally:
        await client.aclose()


async def test_an_undeclared_origin_fails_before_sending(sites):
    declared, undeclared = sites
    client = client_for(declared)
    before = list(undeclared.seen)
    try:
        with pytest.raises(HttpPermissionDenied) as denied:
            await client.get(f"{undeclared.origin}/secret")
    finally:
        await client.aclose()
    assert str(denied.value) == f"http permission denied: GET {undeclared.origin} is not declared in permissions.http of probe"
    assert undeclared.seen == before


async def test_an_undeclared_method_fails_before_sending(sites):
    declared, _ = sites
    client = client_for(declared, ["GET"])
    before = list(declared.seen)
    try:
        with pytest.raises(HttpPermissionDenied, match=f"http permission denied: POST {declared.origin} is not declared"):
            await client.post(f"{declared.origin}/write", json={"x": 1})
    finally:
        await client.aclose()
    assert declared.seen == before


async def test_a_redirect_to_an_undeclared_origin_is_blocked(sites):
    declared, undeclared = sites
    client = client_for(declared, ["GET"])
    undeclared_before = list(undeclared.seen)
    try:
        with pytest.raises(HttpPermissionDenied, match=f"GET {undeclared.origin} is not declared"):
            await client.get(f"{declared.origin}/redirect?to={undeclared.origin}/stolen")
        # A redirect that stays on a declared origin is followed.
        followed = await client.get(f"{declared.origin}/redirect?to=/landing")
        assert followed.json()["path"] == "/landing"
    finally:
        await client.aclose()
    assert undeclared.seen == undeclared_before
    assert ("GET", "/landing") in declared.seen


async def test_scheme_host_and_port_are_all_part_of_the_origin(sites):
    declared, _ = sites
    port = declared.origin.rsplit(":", 1)[1]
    client = client_for(declared)
    assert client.allows("GET", f"{declared.origin}/a")
    assert client.allows("delete", f"{declared.origin}/a")  # no methods listed: every method
    assert not client.allows("GET", f"https://127.0.0.1:{port}/a")
    assert not client.allows("GET", f"http://localhost:{port}/a")
    assert not client.allows("GET", f"http://127.0.0.1:{int(port) + 1}/a")
    assert PluginHttpClient("probe", [("p", {"origin": "https://API.example.com"})]).allows("GET", "https://api.example.com:443/x")


def test_declarations_that_are_not_origins_are_load_errors():
    assert invalid_http_permissions([("permissions.http[0]", {"origin": "https://api.example.com", "methods": ["GET"]})]) is None
    problem = invalid_http_permissions([
        ("permissions.http[0]", {"origin": "https://api.example.com/v1"}),
        ("permissions.http[1]", {"origin": "ftp://files.example.com"}),
        ("permissions.http[2]", {"origin": "https://user:pw@api.example.com"}),
        ("permissions.http[3]", {"origin": "https://api.example.com", "methods": ["FETCH"]}),
    ])
    assert "permissions.http[0].origin 'https://api.example.com/v1': an origin has no path" in problem
    assert "write https://api.example.com" in problem
    assert "permissions.http[1].origin 'ftp://files.example.com': write scheme://host[:port] with http or https" in problem
    assert "permissions.http[2].origin" in problem
    assert "permissions.http[3].methods" in problem


def test_the_package_and_its_runtimes_declare_together():
    definition = Permissions.parse({"http": [{"origin": "https://a.example"}]}, "permissions")
    runtimes = [("probe/fetch", Permissions.parse({"http": [{"origin": "https://b.example", "methods": ["POST"]}]}, "permissions")),
                ("probe/x", None)]
    assert declared_http_permissions(definition, runtimes) == (
        ("permissions.http[0]", {"origin": "https://a.example"}),
        ("probe/fetch: permissions.http[0]", {"origin": "https://b.example", "methods": ["POST"]}),
    )


FETCHER_CODE = '''
from shared.plugin_sdk import ToolError

def register(covel):
    async def fetch(ctx, args):
        try:
            reply = await covel.http.request(args["method"], args["url"])
        except PermissionError as error:
            raise ToolError("forbidden", str(error))
        return {"status": reply.status_code, "body": reply.json()}

    covel.register_tool("fetch", fetch, parameters={"type": "object", "required": ["method", "url"],
                        "properties": {"method": {"type": "string"}, "url": {"type": "string"}}})
'''


def _write(root: Path, plugin_id: str, manifest: str, code: str) -> None:
    (root / plugin_id / "server").mkdir(parents=True)
    (root / plugin_id / "PLUGIN.md").write_text(manifest)
    (root / plugin_id / "server" / "index.py").write_text(code)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def hooks_with_fetcher(tmp_path_factory, sites):
    declared, _ = sites
    plugins = tmp_path_factory.mktemp("http-plugins")
    _write(plugins, "fetcher", f"---\ncontributes:\n  tools: [fetch]\npermissions:\n  http:\n    - origin: {declared.origin}\n"
           "      methods: [GET]\n---\n", FETCHER_CODE)
    _write(plugins, "bad-origin", "---\npermissions:\n  http:\n    - origin: https://api.example.com/v1\n---\n",
           "def register(covel):\n    pass\n")
    registry_addr, hooks_addr = free_addr(), free_addr()
    # The declared site is on 127.0.0.1: the operator allows it (the sandbox's host refuses local addresses otherwise).
    patch = pytest.MonkeyPatch()
    patch.setenv("COVEL_SANDBOX_HTTP_ALLOW_PRIVATE_ORIGINS", declared.origin)
    registry = await start_registry(RegistrySettings(registry_addr=registry_addr, plugin_dirs=[plugins], **service_tls("registry")))
    hooks = await start_hooks(HooksSettings(registry_addr=registry_addr, hooks_addr=hooks_addr, **service_tls("hooks")))
    channel = channel_as(hooks_addr, "scheduler")
    yield hooks_pb2_grpc.HookDispatcherStub(channel)
    await channel.close()
    await hooks.stop(0)
    await registry.stop(0)
    patch.undo()


async def _fetch(stub, method: str, url: str) -> dict:
    reply = await stub.CallTool(hooks_pb2.CallToolRequest(
        context=hooks_pb2.HookContext(session_id="s1", turn_id="t1", approved_plugin_ids=["fetcher"], active_plugin_ids=["fetcher"]),
        plugin_id="fetcher", name="fetch", arguments=json.dumps({"method": method, "url": url}),
    ), timeout=10)
    return json.loads(reply.result)


async def test_plugin_code_in_the_hooks_service_gets_covel_http(hooks_with_fetcher, sites):
    declared, undeclared = sites
    ok = await _fetch(hooks_with_fetcher, "GET", f"{declared.origin}/from-a-tool")
    assert ok == {"ok": True, "data": {"status": 200, "body": {"method": "GET", "path": "/from-a-tool"}}}
    refused = await _fetch(hooks_with_fetcher, "GET", f"{undeclared.origin}/x")
    assert refused["ok"] is False
    assert refused["error"]["message"] == f"http permission denied: GET {undeclared.origin} is not declared in permissions.http of fetcher"
    refused_method = await _fetch(hooks_with_fetcher, "DELETE", f"{declared.origin}/x")
    assert "http permission denied: DELETE" in refused_method["error"]["message"]
    assert ("DELETE", "/x") not in declared.seen


async def test_a_package_with_an_origin_that_is_not_one_does_not_load(hooks_with_fetcher):
    reply = await hooks_with_fetcher.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest(), timeout=5)
    errors = {error.plugin_id: error.message for error in reply.load_errors}
    assert "an origin has no path" in errors["bad-origin"]
