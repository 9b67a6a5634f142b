"""provide_environment (services/hooks/plugin_side/environments.py): asked once per session by the process that runs the
plugin's code, with a workspace folder per (plugin, session); what it gives reaches that plugin's own code only
(ctx.environment / ctx.workspace, state["environment"] / state["workspace"]), in process and in a sandbox worker
as it ships (the data dir hidden, the uid dropped)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from services.hooks.common.workspaces import workspace_root
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.hooks.plugin_side.hookspec_adapter import HookspecAdapter
from services.hooks.sandboxed_entries import load_sandboxed
from services.hooks.tool_host import call_tool
from shared.plugin_sdk import ToolContext
from shared.plugin_sdk.hookspecs import Environment, hookimpl
from shared.sandbox import SandboxPool, SandboxSettings
from shared.settings import REPO_ROOT

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = REPO_ROOT / "tests" / "fixtures" / "plugins" / "environment-probe"
SHIPPED = SandboxSettings(sandbox_hide_dirs=True, sandbox_drop_privileges=True, sandbox_pass_env=[])


class Errors:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    @hookimpl
    def on_error(self, stage, error, message):
        self.seen.append((stage, str(error)))


def environments_of(tmp_path: Path, *objects: object):
    adapter = HookspecAdapter("p", list(objects))
    adapter.environments.root = tmp_path / "workspaces" / "p"
    return adapter.environments


async def test_an_answer_is_asked_once_per_session_and_checked(tmp_path) -> None:
    asked: list[tuple[str, Path]] = []

    class Provider:
        @hookimpl
        async def provide_environment(self, session_id, workspace):
            asked.append((session_id, workspace))
            await asyncio.sleep(0.05)
            chosen = {"s-1": "cache", "s-2": "../elsewhere", "s-3": None}[session_id]
            return Environment(variables={"NAME": session_id, "COUNT": 3, 4: "four"}, workspace=chosen)

    environments = environments_of(tmp_path, Provider())
    first, again = await asyncio.gather(environments.of("s-1"), environments.of("s-1"))
    assert first is again and len(asked) == 1, "concurrent first calls share one answer"
    assert first.variables == {"NAME": "s-1"}, "values that are not text are skipped"
    root = tmp_path / "workspaces" / "p"
    assert asked[0][1] == root / "s-1" and first.workspace == root / "s-1" / "cache" and first.workspace.is_dir()
    # Outside the given folder: refused, the folder stays.
    assert (await environments.of("s-2")).workspace == root / "s-2"
    assert (await environments.of("s-3")).workspace == root / "s-3"
    assert await environments.of("s-1") is first and len(asked) == 3
    assert await environments.of("../s-1") is None, "a session id that is not a folder name gets none"
    assert len(asked) == 3


async def test_one_that_raises_or_answers_the_wrong_type_gives_no_environment(tmp_path) -> None:
    errors = Errors()

    class Raises:
        @hookimpl
        def provide_environment(self, session_id, workspace):
            if session_id == "raise":
                raise RuntimeError("no map")
            return {"NAME": "not an Environment"}

    environments = environments_of(tmp_path, errors, Raises())
    assert await environments.of("raise") is None and await environments.of("wrong") is None
    assert errors.seen == [("provide_environment", "no map")]


ENTRY = '''
import json
from shared.plugin_sdk.hookspecs import Environment, hookimpl


class Provider:
    @hookimpl
    def provide_environment(self, session_id, workspace):
        return Environment(variables={"WHO": session_id})


async def on_turn_start(ctx, payload):
    return None


def tool(ctx, args):
    (ctx.workspace / "tool.json").write_text(json.dumps(dict(ctx.environment)))
    return {"workspace": str(ctx.workspace)}


def register(covel):
    covel.register_hookimpls(Provider())
    covel.register_tool("note", tool, description="writes its environment")
'''


def probe_entry(root: Path = PROBE) -> PluginEntry:
    return PluginEntry(root.name, root, "server/index.py", (("TurnStart", "normal"), ("PostContextAssembly", "normal")), "builtin")


def context(session_id: str, plugin_id: str = "environment-probe") -> ExecutionContext:
    return ExecutionContext(session_id=session_id, turn_id="t1", locale="en", active_plugin_ids=(plugin_id,),
                            plugin_id=plugin_id, runtime_id="narrator")


async def drive(table: HandlerTable, session_id: str) -> None:
    """What the fixture's code writes: TurnStart (a covel.on handler) and PostContextAssembly (system_prompt)."""
    for event, payload in (("TurnStart", {"playerMessage": "I look."}),
                           ("PostContextAssembly", {"messages": [{"role": "user", "content": "I look."}], "systemPrompt": ""})):
        result = await dispatch(table, event, context(session_id), payload)
        assert [entry[2] for entry in result.raw_trace] == ["ok"], result.raw_trace


def seen(data_dir: Path, session_id: str) -> dict:
    folder = workspace_root(data_dir, "environment-probe") / session_id
    return {"asked": (folder / "asked.txt").read_text(), "handler": json.loads((folder / "notes" / "handler.json").read_text()),
            "hookspec": json.loads((folder / "notes" / "hookspec.json").read_text())}


async def test_in_process_the_plugins_handlers_and_hooks_see_their_sessions_environment(tmp_path) -> None:
    result = load_entries([probe_entry()], generation=1, data_dir=tmp_path)
    assert result.errors == {}
    table = HandlerTable(result.loaded[0].registrar.hooks, {"environment-probe": "builtin"})
    for session_id in ("s-1", "s-2"):
        await drive(table, session_id)
        expected = {"PROBE_SESSION": session_id, "PROBE_GREETING": "hello"}
        assert seen(tmp_path, session_id) == {"asked": session_id, "handler": expected, "hookspec": expected}


async def test_a_tool_sees_its_environment_and_other_plugins_see_none(tmp_path) -> None:
    (tmp_path / "tooled" / "server").mkdir(parents=True)
    (tmp_path / "tooled" / "server" / "index.py").write_text(ENTRY)
    plugins = [PluginEntry("tooled", tmp_path / "tooled", "server/index.py", (), "builtin", declared_tools=("note",)), probe_entry()]
    result = load_entries(plugins, generation=1, data_dir=tmp_path / "data")
    assert result.errors == {}
    [tool] = result.loaded[0].registrar.tools
    outcome = await call_tool(tool, ToolContext(session_id="s-9", turn_id="t", locale="en", runtime_id="narrator", logical_turn=1), "{}")
    folder = workspace_root(tmp_path / "data", "tooled") / "s-9"
    assert outcome == {"ok": True, "data": {"workspace": str(folder)}}
    assert json.loads((folder / "tool.json").read_text()) == {"WHO": "s-9"}
    # A plugin without provide_environment is not wrapped: its context has none.
    bare = ToolContext(session_id="s-9", turn_id="t", locale="en", runtime_id="narrator", logical_turn=1)
    assert dict(bare.environment) == {} and bare.workspace is None


async def test_in_a_shipped_sandbox_the_worker_writes_its_own_workspace_only(tmp_path) -> None:
    """The data dir is hidden under an empty tmpfs and the worker runs as the sandbox uid: the plugin's own
    workspaces are bound back at their paths, writable; another plugin's worker cannot reach them."""
    data_dir = tmp_path / "data"
    (tmp_path / "snoop" / "server").mkdir(parents=True)
    (tmp_path / "snoop" / "server" / "index.py").write_text(SNOOP.format(target=str(workspace_root(data_dir, "environment-probe"))))
    for path in (tmp_path, tmp_path / "snoop", tmp_path / "snoop" / "server", tmp_path / "snoop" / "server" / "index.py"):
        path.chmod(0o755)
    pool = SandboxPool(SHIPPED, "test", data_dir=data_dir)
    try:
        snoop = PluginEntry("snoop", tmp_path / "snoop", "server/index.py", (("TurnStart", "normal"),), "builtin")
        result = await load_sandboxed(pool, [probe_entry(), snoop], generation=1)
        assert result.errors == {}
        table = HandlerTable([hook for loaded in result.loaded[:1] for hook in loaded.registrar.hooks], {"environment-probe": "builtin"})
        await drive(table, "s-1")
        expected = {"PROBE_SESSION": "s-1", "PROBE_GREETING": "hello"}
        assert seen(data_dir, "s-1") == {"asked": "s-1", "handler": expected, "hookspec": expected}
        report = pool.isolation_report or {}
        if str(report.get("namespaces", "")).startswith("pid"):
            assert str(data_dir.resolve()) in report["hidden"], report
        if os.geteuid() == 0:
            assert (workspace_root(data_dir, "environment-probe") / "s-1" / "asked.txt").stat().st_uid == SHIPPED.sandbox_uid
        snooping = HandlerTable(result.loaded[1].registrar.hooks, {"snoop": "builtin"})
        answer = await dispatch(snooping, "TurnStart", context("s-1", "snoop"), {"playerMessage": "x"})
        assert answer.raw_trace[0][2] == "abort" and answer.reason in ("FileNotFoundError", "PermissionError"), answer
        assert not (workspace_root(data_dir, "environment-probe") / "s-1" / "snooped.txt").exists()
    finally:
        await pool.close()


SNOOP = '''
def on_turn_start(ctx, payload):
    try:
        with open("{target}/s-1/snooped.txt", "w") as out:
            out.write("mine now")
    except OSError as error:
        return {{"action": "abort", "reason": type(error).__name__}}
    return {{"action": "abort", "reason": "written"}}


def register(covel):
    covel.on("TurnStart", on_turn_start)
'''
