"""A package in Covel's published shape (tests/fixtures/covel-shape): panels with their metadata and a `view`, a
`webview` panel, and a zh locale file naming settings, commands and options by their identity. It passes
`covel validate-plugin`, and through the five services ListPanels serves its panels with their metadata (typed) and
ListCommands its commands, translated in a zh session."""

from __future__ import annotations

import io
import shutil

import pytest
import pytest_asyncio

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.validate_plugin import run
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")

PACKAGE = REPO_ROOT / "tests" / "fixtures" / "covel-shape" / "covel-standing"


async def test_the_package_validates_without_a_diagnostic() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run([str(PACKAGE)], out, err) == 0, out.getvalue() + err.getvalue()
    assert "✓ covel-standing" in out.getvalue() and "warning" not in out.getvalue() and "error" not in out.getvalue()
    assert "languages: text en, zh" in out.getvalue()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scheduler(tmp_path_factory):
    data = tmp_path_factory.mktemp("covel-shape")
    community = data / "community"
    community.mkdir()
    shutil.copytree(PACKAGE, community / "covel-standing")
    async with running_services(data, plugin_dirs=(community,)) as group, open_channel(group.addrs["scheduler"]) as channel:
        yield scheduler_pb2_grpc.SchedulerStub(channel)


async def _session(stub, locale: str) -> str:
    request = minimal_session(requested_plugins=["covel-standing"], approved_plugins=["covel-standing"], locale=locale)
    session = (await stub.CreateSession(request)).session
    assert "covel-standing" in session.active_plugins
    return session.id


async def test_list_panels_serves_the_metadata_typed_and_the_webview_as_a_page(scheduler) -> None:
    session_id = await _session(scheduler, "en")
    panels = {p.id: p for p in (await scheduler.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels}
    standing, page = panels["standing"], panels["map"]
    assert (standing.group, standing.label, standing.short_label, standing.icon, standing.group_order) == ("people", "Standing", "Std", "heart", 2)
    assert (standing.data_source_namespace, standing.empty_state_message, standing.empty) == ("scores", "Nobody has an opinion of you yet.", True)
    assert standing.file == "ui/standing.json" and not standing.HasField("webview") and "view" in from_struct(standing.spec)
    assert (page.group, page.label, page.group_order, page.webview.src, list(page.webview.sandbox)) == ("world", "Map", 1, "ui/map.html", ["allow-scripts"])
    ran = await scheduler.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session_id, text="/nudge mira", idempotency_key="nudge-1"))
    assert ran.result_json == '{"nudged": "mira"}', ran
    after = {p.id: p for p in (await scheduler.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels}
    assert not after["standing"].empty and from_struct(after["standing"].state)["data"]["scores"]["mira"]["score"] == 1


async def test_a_zh_session_reads_the_translations_matched_by_identity(scheduler) -> None:
    session_id = await _session(scheduler, "zh")
    commands = {c.name: c for c in (await scheduler.ListCommands(scheduler_pb2.ListCommandsRequest(session_id=session_id))).commands}
    assert (commands["nudge"].label, commands["nudge"].description, commands["nudge"].arguments[0].description) == ("推一把", "让某人的声望加一。", "推谁")
    assert (commands["forget"].label, commands["forget"].description) == ("遗忘", "把某人的声望重置为零。")
    panels = {p.id: p for p in (await scheduler.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id))).panels}
    assert (panels["standing"].label, panels["standing"].short_label, panels["standing"].empty_state_message) == ("声望", "声", "还没有人对你有看法。")
    assert from_struct(panels["standing"].spec)["view"]["title"] == "声望" and panels["map"].label == "地图"
    english = await _session(scheduler, "en")
    commands = {c.name: c for c in (await scheduler.ListCommands(scheduler_pb2.ListCommandsRequest(session_id=english))).commands}
    assert (commands["nudge"].label, commands["nudge"].description) == ("Nudge", "Raise someone's standing by one.")


async def test_get_session_plugins_says_what_a_community_plugin_may_do(scheduler) -> None:
    """GetSessionPlugins' `community`: the session's community plugins, approved or not, with their manifests' reach."""
    waiting = (await scheduler.CreateSession(minimal_session(requested_plugins=["covel-standing"], locale="en"))).session.id
    [plugin] = (await scheduler.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=waiting))).community
    assert (plugin.plugin_id, plugin.display_name, plugin.version, plugin.approved) == ("covel-standing", "Standing", "1.0.0", False)
    assert list(plugin.http) == [], "it asks for no web origin"
    assert "actions: nudge" in plugin.contributes and "commands: nudge, forget" in plugin.contributes
    assert "data: scores" in plugin.contributes and "panels: right" in plugin.contributes, list(plugin.contributes)
    approved = await _session(scheduler, "en")
    [plugin] = (await scheduler.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=approved))).community
    assert plugin.approved
    builtin_only = (await scheduler.CreateSession(minimal_session(locale="en"))).session.id
    assert not (await scheduler.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=builtin_only))).community
