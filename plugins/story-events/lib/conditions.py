"""story-events' conditions: how a declared event's `when` is checked, normalised and decided.

A condition is a tree. Its inner nodes are `{all: [...]}`, `{any: [...]}` and `{not: <node>}`, nested to any
depth; its leaves are

    {dimension: <id>, path?: "a.b" | [a, b], <operator>: <value>}   a dimension of the world (its value now)
    {time: day | hour | minutes | period, <operator>: <value>}     the story's clock (world-time-context@1)
    {turn: {gte?, gt?, lte?, lt?, equals?}}                       the player's turn number (1 from the first action)
    {flag: <name>}                                                 a flag a fired event set (and none cleared since)
    {fired: <event id>, turnsSince?: {gte?, gt?, lte?, lt?}}        another event fired (that many turns ago)
    {said: <word> | [<word>, ...]}                                  the player's words this turn hold one of them
    {action: <kind> | [<kind>, ...]}                                the player took an action of that kind this turn

with exactly one operator of OPERATORS on a dimension or time leaf. Decisions are three-valued (Kleene): a
leaf that cannot be decided (a dimension or clock the session does not have, a path the value lacks) is
UNKNOWN; `not` keeps it UNKNOWN, `all` is false as soon as one branch is false, `any` true as soon as one is
true, and an event whose whole condition is UNKNOWN does not fire. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OPERATORS = ("equals", "notEquals", "in", "gte", "gt", "lte", "lt", "exists")
NUMERIC = ("gte", "gt", "lte", "lt")
COUNT_OPERATORS = ("gte", "gt", "lte", "lt", "equals")
TIME_FIELDS = ("day", "hour", "minutes", "period")
LEAF_KINDS = ("dimension", "time", "turn", "flag", "fired", "said", "action")
GROUP_KINDS = ("all", "any", "not")
MAX_DEPTH = 100  # deep enough for any condition a person writes; bounded so a runaway file cannot exhaust the stack
MAX_NODES = 1000
UNKNOWN = None  # the third truth value


class ConditionError(ValueError):
    """A condition that cannot mean anything; `where` is its place in the tree (when.all[1].not)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass(frozen=True)
class Facts:
    """What a condition is decided on: everything as the turn found it."""

    turn: int
    dimensions: Mapping[str, Any] = field(default_factory=dict)  # id -> value
    time: Mapping[str, Any] | None = None  # world-time-context@1 with `hour`, or None: no clock in the session
    flags: frozenset[str] = frozenset()
    fired: Mapping[str, int] = field(default_factory=dict)  # event id -> the turn it last fired
    said: str = ""  # the player's words this turn, casefolded
    kinds: frozenset[str] = frozenset()  # the kinds of the player's actions this turn


# -- normalising ----------------------------------------------------------------------------------

def normalise(node: Any, *, dimensions: Sequence[str], events: Sequence[str], where: str = "when") -> dict[str, Any]:
    """The canonical form of a condition (lists for words and kinds, a list of keys for a path), or
    ConditionError naming the first place that is wrong. `dimensions` and `events` are the ids a leaf may name."""
    counter = [0]
    return _normalise(node, set(dimensions), set(events), where, 0, counter)


def _normalise(node: Any, dimensions: set[str], events: set[str], where: str, depth: int, counter: list[int]) -> dict[str, Any]:
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise ConditionError(where, f"a condition has at most {MAX_NODES} nodes")
    if depth > MAX_DEPTH:
        raise ConditionError(where, f"conditions nest at most {MAX_DEPTH} deep")
    if not isinstance(node, Mapping) or not node:
        raise ConditionError(where, "a condition is an object: {all}, {any}, {not} or a leaf")
    kinds = [kind for kind in (*GROUP_KINDS, *LEAF_KINDS) if kind in node]
    if len(kinds) != 1:
        named = ", ".join(kinds) if kinds else ", ".join(sorted(map(str, node)))
        raise ConditionError(where, f"a condition is exactly one of {', '.join((*GROUP_KINDS, *LEAF_KINDS))} (found {named or 'none'})")
    kind = kinds[0]
    if kind in ("all", "any"):
        _only(node, {kind}, where)
        branches = node[kind]
        if not isinstance(branches, list) or not branches:
            raise ConditionError(f"{where}.{kind}", "a non-empty list of conditions")
        return {kind: [_normalise(b, dimensions, events, f"{where}.{kind}[{i}]", depth + 1, counter) for i, b in enumerate(branches)]}
    if kind == "not":
        _only(node, {"not"}, where)
        return {"not": _normalise(node["not"], dimensions, events, f"{where}.not", depth + 1, counter)}
    if kind == "dimension":
        _only(node, {"dimension", "path", *OPERATORS}, where)
        dimension = node["dimension"]
        if not isinstance(dimension, str) or not dimension:
            raise ConditionError(f"{where}.dimension", "the id of a dimension of the world")
        if dimension not in dimensions:
            known = ", ".join(sorted(dimensions)) or "none"
            raise ConditionError(f"{where}.dimension", f"the world has no dimension {dimension!r} (it has: {known})")
        leaf: dict[str, Any] = {"dimension": dimension, **_operator(node, where)}
        path = _path(node.get("path"), f"{where}.path")
        if path:
            leaf["path"] = path
        return leaf
    if kind == "time":
        _only(node, {"time", *OPERATORS}, where)
        if node["time"] not in TIME_FIELDS:
            raise ConditionError(f"{where}.time", f"one of {', '.join(TIME_FIELDS)}")
        return {"time": node["time"], **_operator(node, where)}
    if kind == "turn":
        _only(node, {"turn"}, where)
        return {"turn": _counts(node["turn"], f"{where}.turn", COUNT_OPERATORS)}
    if kind == "flag":
        _only(node, {"flag"}, where)
        if not isinstance(node["flag"], str) or not node["flag"].strip():
            raise ConditionError(f"{where}.flag", "the name of a flag")
        return {"flag": node["flag"].strip()}
    if kind == "fired":
        _only(node, {"fired", "turnsSince"}, where)
        if node["fired"] not in events:
            raise ConditionError(f"{where}.fired", f"no event {node['fired']!r} is declared")
        leaf = {"fired": node["fired"]}
        if "turnsSince" in node:
            leaf["turnsSince"] = _counts(node["turnsSince"], f"{where}.turnsSince", NUMERIC)
        return leaf
    # said, action: a word (kind) or a list of them
    _only(node, {kind}, where)
    values = node[kind] if isinstance(node[kind], list) else [node[kind]]
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ConditionError(f"{where}.{kind}", "a non-empty text or a list of them")
    return {kind: [v.strip().casefold() if kind == "said" else v.strip() for v in values]}


def _only(node: Mapping, allowed: set[str], where: str) -> None:
    extra = sorted(str(key) for key in node if key not in allowed)
    if extra:
        raise ConditionError(where, f"unexpected {', '.join(extra)} here (allowed: {', '.join(sorted(allowed))})")


def _operator(node: Mapping, where: str) -> dict[str, Any]:
    found = [op for op in OPERATORS if op in node]
    if len(found) != 1:
        raise ConditionError(where, f"exactly one operator of {', '.join(OPERATORS)} (found {', '.join(found) or 'none'})")
    op, value = found[0], node[found[0]]
    if op in NUMERIC and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConditionError(f"{where}.{op}", "a number")
    if op == "in" and not isinstance(value, list):
        raise ConditionError(f"{where}.in", "a list of values")
    if op == "exists" and not isinstance(value, bool):
        raise ConditionError(f"{where}.exists", "true or false")
    return {op: value}


def _counts(value: Any, where: str, allowed: Sequence[str]) -> dict[str, int]:
    if not isinstance(value, Mapping) or not value:
        raise ConditionError(where, f"an object of {', '.join(allowed)} with whole numbers")
    out = {}
    for op, number in value.items():
        if op not in allowed:
            raise ConditionError(where, f"unexpected {op} (allowed: {', '.join(allowed)})")
        if isinstance(number, bool) or not isinstance(number, int):
            raise ConditionError(f"{where}.{op}", "a whole number")
        out[op] = number
    return out


def _path(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    parts = value.split(".") if isinstance(value, str) else value
    if not isinstance(parts, list) or not all(isinstance(p, (str, int)) and str(p) for p in parts):
        raise ConditionError(where, "a dotted path (a.b) or a list of keys")
    return [str(p) for p in parts]


# -- deciding -------------------------------------------------------------------------------------

def decide(node: Mapping[str, Any], facts: Facts, unknowns: list[str] | None = None) -> bool | None:
    """True, False or UNKNOWN for a normalised condition. `unknowns` collects why a leaf was UNKNOWN."""
    if "all" in node:
        results = [decide(branch, facts, unknowns) for branch in node["all"]]
        return False if False in results else UNKNOWN if UNKNOWN in results else True
    if "any" in node:
        results = [decide(branch, facts, unknowns) for branch in node["any"]]
        return True if True in results else UNKNOWN if UNKNOWN in results else False
    if "not" in node:
        result = decide(node["not"], facts, unknowns)
        return UNKNOWN if result is UNKNOWN else not result
    if "dimension" in node:
        if node["dimension"] not in facts.dimensions:
            return _unknown(unknowns, f"the session has no dimension {node['dimension']}")
        value = facts.dimensions[node["dimension"]]
        for key in node.get("path") or []:
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            elif isinstance(value, (list, tuple)) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                if "exists" in node:
                    return node["exists"] is False
                return _unknown(unknowns, f"dimension {node['dimension']} has nothing at {'.'.join(node['path'])}")
        return compare(value, node)
    if "time" in node:
        if facts.time is None or node["time"] not in facts.time:
            return _unknown(unknowns, "the session has no story clock (world-time-context@1)")
        return compare(facts.time[node["time"]], node)
    if "turn" in node:
        return counts_hold(facts.turn, node["turn"])
    if "flag" in node:
        return node["flag"] in facts.flags
    if "fired" in node:
        if node["fired"] not in facts.fired:
            return False
        return counts_hold(facts.turn - facts.fired[node["fired"]], node.get("turnsSince") or {})
    if "said" in node:
        return any(said_in(word, facts.said) for word in node["said"])
    if "action" in node:
        return any(kind in facts.kinds for kind in node["action"])
    return _unknown(unknowns, "an unknown kind of condition")


def _unknown(unknowns: list[str] | None, why: str) -> None:
    if unknowns is not None and why not in unknowns:
        unknowns.append(why)
    return UNKNOWN


def compare(value: Any, leaf: Mapping[str, Any]) -> bool:
    """The one operator of a dimension or time leaf, applied to the value found."""
    if "exists" in leaf:
        return (value is not None) is leaf["exists"]
    if "equals" in leaf:
        return _thaw(value) == leaf["equals"]
    if "notEquals" in leaf:
        return _thaw(value) != leaf["notEquals"]
    if "in" in leaf:
        return _thaw(value) in leaf["in"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    op = next(op for op in NUMERIC if op in leaf)
    return _holds(value, op, leaf[op])


def counts_hold(number: int, counts: Mapping[str, int]) -> bool:
    return all(_holds(number, op, bound) for op, bound in counts.items())


def _holds(number: float, op: str, bound: float) -> bool:
    return {"gte": number >= bound, "gt": number > bound, "lte": number <= bound, "lt": number < bound, "equals": number == bound}[op]


_SPACED = re.compile(r"^[\w' -]+$", re.ASCII)


def said_in(word: str, said: str) -> bool:
    """A word of a spaced script matches where a word starts ("lens" in "the lenses", not in "allens"); a word of
    another script (Chinese, Japanese) anywhere."""
    word = word.casefold()
    if _SPACED.match(word):
        return re.search(rf"(?<![\w]){re.escape(word)}", said) is not None
    return word in said


def _thaw(value: Any) -> Any:
    """Frozen world views (mappings, tuples) as plain JSON values, for comparing with what a world wrote."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def thaw(value: Any) -> Any:
    return _thaw(value)
