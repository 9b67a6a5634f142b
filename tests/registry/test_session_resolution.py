from __future__ import annotations

from pathlib import Path

from services.registry.catalogue import scan
from services.registry.session_resolution import resolve_session_plugins
from tests.registry.conftest import write_plugin


def catalogue(tmp_path: Path, plugins: dict[str, str]):
    """The packages as the operator's own (a builtin folder): their `kind: core` counts."""
    for plugin_id, frontmatter in plugins.items():
        write_plugin(tmp_path, plugin_id, frontmatter)
    return scan([tmp_path], builtin_dirs=[tmp_path])


def resolve(packages, requested=(), excluded=()):
    result = resolve_session_plugins(packages, list(requested), list(excluded))
    return result.active, result.auto_added, {r.plugin_id: (r.code, r.contract) for r in result.rejected}


def test_core_plus_requested_in_catalogue_order(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"b-core": "kind: core", "a-opt": "kind: plugin", "c-opt": "kind: plugin"})
    assert resolve(packages, ["c-opt", "a-opt", "c-opt"]) == (["a-opt", "b-core", "c-opt"], [], {})
    assert resolve(packages) == (["b-core"], [], {})


def test_excluded_wins_over_core_and_requested(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"core1": "kind: core", "opt": "kind: plugin"})
    assert resolve(packages, ["opt"], ["core1", "opt"]) == ([], [], {})


def test_unknown_and_failed_requests_are_rejected(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"ok": "kind: plugin", "broken": "kind: sometimes"})
    active, _, rejected = resolve(packages, ["ok", "ghost", "broken"])
    assert active == ["ok"]
    assert rejected == {"ghost": ("not-found", ""), "broken": ("failed-to-load", "")}


def test_required_contract_pulls_in_the_only_provider(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {"consumer": "requires: [facts@1]", "provider": "provides: [facts@1]", "unrelated": "kind: plugin"},
    )
    assert resolve(packages, ["consumer"]) == (["consumer", "provider"], ["provider"], {})


def test_required_contract_already_active_adds_nothing(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"consumer": "requires: [facts@1]", "p1": "provides: [facts@1]", "p2": "provides: [facts@1]"})
    assert resolve(packages, ["consumer", "p2"]) == (["consumer", "p2"], [], {})


def test_default_provider_is_preferred(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "consumer": "requires: [facts@1]",
            "p1": "provides: [facts@1]",
            "p2": "provides:\n  - contract: facts@1\n    default: true",
        },
    )
    assert resolve(packages, ["consumer"]) == (["consumer", "p2"], ["p2"], {})


def test_several_providers_without_default_is_ambiguous(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"consumer": "requires: [facts@1]", "p1": "provides: [facts@1]", "p2": "provides: [facts@1]"})
    assert resolve(packages, ["consumer"]) == ([], [], {"consumer": ("ambiguous-provider", "facts@1")})


def test_no_provider_rejects_the_requiring_plugin(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"consumer": "requires: [facts@1]", "core1": "kind: core"})
    assert resolve(packages, ["consumer"]) == (["core1"], [], {"consumer": ("missing-provider", "facts@1")})


def test_excluded_provider_does_not_count(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"consumer": "requires: [facts@1]", "provider": "provides: [facts@1]"})
    assert resolve(packages, ["consumer"], ["provider"]) == ([], [], {"consumer": ("missing-provider", "facts@1")})


def test_transitive_requirements_and_dropped_dependencies(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "top": "requires: [mid@1]",
            "middle": "provides: [mid@1]\nrequires: [low@1]",
            "bottom": "provides: [low@1]",
            "lonely": "requires: [mid@1, none@1]",
        },
    )
    assert resolve(packages, ["top"]) == (["bottom", "middle", "top"], ["bottom", "middle"], {})
    # `lonely` pulls in middle+bottom, then fails on none@1: its auto dependencies go with it.
    assert resolve(packages, ["lonely"]) == ([], [], {"lonely": ("missing-provider", "none@1")})


def test_default_core_provider_steps_back_for_a_requested_provider(tmp_path: Path) -> None:
    packages = catalogue(
        tmp_path,
        {
            "default-narrator": "kind: core\nprovides:\n  - contract: story@1\n    default: true",
            "chat-narrator": "provides: [story@1]",
        },
    )
    assert resolve(packages) == (["default-narrator"], [], {})
    active, _, rejected = resolve(packages, ["chat-narrator"])
    assert active == ["chat-narrator"]
    assert rejected == {"default-narrator": ("superseded", "story@1")}


def test_conflicts_reject_the_later_plugin(tmp_path: Path) -> None:
    packages = catalogue(tmp_path, {"a": "conflicts: [x@1]", "b": "provides: [x@1]"})
    active, _, rejected = resolve(packages, ["a", "b"])
    assert active == ["a"] and rejected == {"b": ("conflict", "x@1")}


# -- issue 16: the trust gate and the session's recorded set ------------------------------------
from services.registry.session_resolution import resolve_confirmed_session_plugins  # noqa: E402

HANDLER_RUNTIME = {
    "runtimes/work/RUNTIME.md": "---\nschedule:\n  stage: post-turn\nfunction: {}\n---\nWorks.\n",
    "runtimes/work/handler.py": "async def handler(ctx):\n    return {}\n",
}


def test_a_community_plugin_with_only_a_function_runtime_needs_approval_in_every_execution(tmp_path: Path) -> None:
    # No entry module: its handler.py is still code, so the gate applies (it used to run unapproved).
    write_plugin(tmp_path, "worker", "provides: [work@1]", files=HANDLER_RUNTIME)
    write_plugin(tmp_path, "user", "requires: [work@1]")
    packages = scan([tmp_path])
    gated = resolve_confirmed_session_plugins(packages, ["user", "worker"], approved=[])
    assert gated.runnable == []
    reasons = {item.plugin_id: (item.code, item.reason) for item in gated.unavailable}
    assert reasons["worker"] == ("approval-required", "plugin `worker` is a community plugin; approve it with SetPluginApprovals")
    assert reasons["user"][0] == "missing-provider" and "its provider `worker` does not run now: approval-required" in reasons["user"][1]
    assert resolve_confirmed_session_plugins(packages, ["user", "worker"], approved=["worker"]).runnable == ["user", "worker"]
    # Approvals not given: not consulted.
    assert resolve_confirmed_session_plugins(packages, ["user", "worker"]).runnable == ["user", "worker"]


def test_a_community_plugin_without_code_needs_no_approval(tmp_path: Path) -> None:
    write_plugin(tmp_path, "prompts-only", "kind: plugin")
    assert resolve_confirmed_session_plugins(scan([tmp_path]), ["prompts-only"], approved=[]).runnable == ["prompts-only"]


def test_stopped_plugins_and_the_provider_they_wait_for_are_recorded(tmp_path: Path) -> None:
    write_plugin(tmp_path / "community", "consumer", "requires: [lore@1]")
    write_plugin(tmp_path / "community", "lore", "provides: [lore@1]", files=HANDLER_RUNTIME)
    write_plugin(tmp_path / "builtin", "core-needs-x", "kind: core\nrequires: [x@1]")
    packages = scan([tmp_path / "builtin", tmp_path / "community"], builtin_dirs=[tmp_path / "builtin"])
    result = resolve_session_plugins(packages, ["consumer"], [], approved=[])
    assert result.active == []
    assert {item.plugin_id: item.code for item in result.unavailable} == {"consumer": "approval-required", "core-needs-x": "missing-provider"}
    # Recorded: the stopped plugins, and the one installed provider each waits for (not approved),
    # so approving it brings them back without re-resolving the session.
    assert result.session_plugins == ["core-needs-x", "consumer", "lore"]
    approved = resolve_session_plugins(packages, ["consumer"], [], approved=["lore"])
    assert approved.active == ["consumer", "lore"] and approved.session_plugins == ["core-needs-x", "consumer", "lore"]


def test_a_choice_of_providers_records_none_of_them(tmp_path: Path) -> None:
    write_plugin(tmp_path, "consumer", "requires: [lore@1]")
    write_plugin(tmp_path, "p1", "provides: [lore@1]", files=HANDLER_RUNTIME)
    write_plugin(tmp_path, "p2", "provides: [lore@1]", files=HANDLER_RUNTIME)
    result = resolve_session_plugins(scan([tmp_path]), ["consumer"], [], approved=[])
    # Two unapproved providers: which one to approve is the player's choice, so neither is recorded.
    assert {item.plugin_id: item.code for item in result.unavailable} == {"consumer": "approval-required"}
    assert result.session_plugins == ["consumer"] and result.active == []
