"""A session's lorebook in the store (services/store/lorebook.py): the world's entries written with the session,
entries put and deleted by owner and id (versioned), a plugin's own entries through proposals, bad ones refused."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import commit_turn, expect_error, new_session, outcomes_by_id, proposal, violated_fields

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED


def entry(owner: str, entry_id: str, **fields) -> store_pb2.LorebookEntry:
    return store_pb2.LorebookEntry(owner=owner, id=entry_id, keys=fields.pop("keys", ["lamp"]), content=fields.pop("content", "It is old."),
                                   **fields)


async def lorebook(stub, session_id: str) -> list[tuple[str, str, int, str]]:
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
    return [(e.owner, e.id, e.version, e.content) for e in world.lorebook]


async def test_the_worlds_entries_come_with_the_session_and_the_players_are_versioned(stub) -> None:
    world = store_pb2.SessionWorld(writer="world:harbor", lorebook=[entry("world", "lighthouse", title="The lighthouse")])
    session = (await stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(world_id="harbor"), world=world))).session
    put = store_pb2.PutLorebookEntryRequest(session_id=session.id, entry=entry("player", "notes", content="Mira lies."))
    first = (await stub.PutLorebookEntry(put)).entry
    put.entry.content = "Mira lies about the boats."
    second = (await stub.PutLorebookEntry(put)).entry
    assert (first.version, second.version) == (1, 2)
    assert await lorebook(stub, session.id) == [("player", "notes", 2, "Mira lies about the boats."), ("world", "lighthouse", 1, "It is old.")]
    deleted = await stub.DeleteLorebookEntry(store_pb2.DeleteLorebookEntryRequest(session_id=session.id, owner="player", id="notes"))
    again = await stub.DeleteLorebookEntry(store_pb2.DeleteLorebookEntryRequest(session_id=session.id, owner="player", id="notes"))
    assert (deleted.deleted, again.deleted) == (True, False)
    assert await lorebook(stub, session.id) == [("world", "lighthouse", 1, "It is old.")]


async def test_a_bad_entry_is_refused_naming_the_field(stub) -> None:
    session = await new_session(stub)
    for bad, field in ((entry("gm", "x"), "entry.owner"), (entry("player", ""), "entry.id"), (entry("player", "x", content=" "), "entry.content"),
                       (entry("player", "x", keys=[]), "entry.keys"), (entry("player", "x", keys=["k"] * 33), "entry.keys")):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                                   stub.PutLorebookEntry(store_pb2.PutLorebookEntryRequest(session_id=session.id, entry=bad)))
        assert violated_fields(error) == [field]
    world = store_pb2.SessionWorld(writer="world:harbor", lorebook=[entry("player", "x")])
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                               stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(), world=world)))
    assert violated_fields(error) == ["world.lorebook[0].owner"]


async def test_a_plugin_writes_its_own_entries_through_proposals(stub) -> None:
    session = await new_session(stub)
    upsert = proposal("lorebook.upsert", {"id": "rumour", "keys": ["boats"], "content": "The boats were seen at Gull Point."}, plugin_id="codex",
                      runtime_id="codex/a")
    bad = proposal("lorebook.upsert", {"id": "empty", "content": "No keys, not constant."}, plugin_id="codex", runtime_id="codex/b")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [upsert, bad])).turn)
    assert outcomes[upsert.id].status == COMMITTED and outcomes[bad.id].status != COMMITTED and "keys" in outcomes[bad.id].reason
    assert await lorebook(stub, session.id) == [("plugin:codex", "rumour", 1, "The boats were seen at Gull Point.")]
    # A plugin deletes only its own: codex's delete of another owner's id changes nothing there.
    await stub.PutLorebookEntry(store_pb2.PutLorebookEntryRequest(session_id=session.id, entry=entry("player", "rumour")))
    delete = proposal("lorebook.delete", {"id": "rumour"}, plugin_id="codex")
    assert outcomes_by_id((await commit_turn(stub, session.id, [delete])).turn)[delete.id].status == COMMITTED
    assert await lorebook(stub, session.id) == [("player", "rumour", 1, "It is old.")]


async def test_activation_rules_and_lorebook_settings_are_kept_with_the_session(stub) -> None:
    from covel.common.v1 import common_pb2
    from shared.lorebook_rules import activation_from_proto

    rules = common_pb2.LorebookActivation(secondary_keys=["night"], selective_logic="notAny", sticky=2, position="atDepth", depth=0,
                                          has_depth=True, probability=0, has_probability=True, whole_words="false")
    world = store_pb2.SessionWorld(writer="world:harbor", lorebook=[entry("world", "lighthouse", activation=rules), entry("world", "plain")],
                                   lorebook_settings=common_pb2.LorebookSettings(scan_depth=3, token_budget=800, recursive=True, max_recursion=1))
    session = (await stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(world_id="harbor"), world=world))).session
    read = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    by_id = {e.id: e for e in read.lorebook}
    assert activation_from_proto(by_id["lighthouse"].activation) == {
        "secondaryKeys": ["night"], "selectiveLogic": "notAny", "sticky": 2, "position": "atDepth", "depth": 0, "probability": 0,
        "wholeWords": False}
    assert activation_from_proto(by_id["plain"].activation) == {}
    assert (read.lorebook_settings.scan_depth, read.lorebook_settings.token_budget, read.lorebook_settings.max_recursion) == (3, 800, 1)
    plain = await new_session(stub)
    assert not (await stub.GetWorld(store_pb2.GetWorldRequest(session_id=plain.id))).HasField("lorebook_settings")
    world.lorebook_settings.token_budget = 10**9
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                               stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(), world=world)))
    assert violated_fields(error) == ["world.lorebook_settings.token_budget"]


async def test_a_plugins_entry_carries_activation_rules_and_bad_ones_or_bad_regex_keys_are_refused(stub) -> None:
    from shared.lorebook_rules import activation_from_proto

    session = await new_session(stub)
    good = proposal("lorebook.upsert", {"id": "storm", "keys": ["/sto+rm/i"], "content": "Six boats.",
                                        "activation": {"sticky": 2, "position": "atDepth", "depth": 0, "secondaryKeys": ["harbor"]}},
                    runtime_id="codex/a")  # each in its own unit: a refused one rolls back only its own
    bad_rule = proposal("lorebook.upsert", {"id": "x", "keys": ["x"], "content": "x", "activation": {"sticky": -1}}, runtime_id="codex/b")
    unknown_rule = proposal("lorebook.upsert", {"id": "y", "keys": ["y"], "content": "y", "activation": {"colour": "red"}},
                            runtime_id="codex/c")
    bad_regex = proposal("lorebook.upsert", {"id": "z", "keys": ["/(a)\\1/"], "content": "z"}, runtime_id="codex/d")
    outcomes = outcomes_by_id((await commit_turn(stub, session.id, [good, bad_rule, unknown_rule, bad_regex])).turn)
    assert outcomes[good.id].status == COMMITTED, outcomes[good.id].reason
    reasons = {key: outcomes[p.id].reason for key, p in (("rule", bad_rule), ("unknown", unknown_rule), ("regex", bad_regex))}
    assert "activation.sticky must be a whole number from 0 to 10000" in reasons["rule"]
    assert "activation.colour is not a rule" in reasons["unknown"] and "RE2" in reasons["regex"]
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    [storm] = [e for e in world.lorebook if e.id == "storm"]
    assert activation_from_proto(storm.activation) == {"sticky": 2, "position": "atDepth", "depth": 0, "secondaryKeys": ["harbor"]}
    put = store_pb2.PutLorebookEntryRequest(session_id=session.id, entry=entry("player", "mine", keys=["/(?=x)/"]))
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.PutLorebookEntry(put))
    assert violated_fields(error) == ["entry.keys"]
