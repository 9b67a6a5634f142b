"""The scripted model's answers for npc-graph's extractor (npc-graph.facts@1).

It reads what a real model would: the player's action (the user message) and the extractor's
<runtime-inputs> (the story, the world's characters with their aliases, the relationships as they stand),
and gives the relationships that text states between two characters it names:

    Mira distrusts Old Tobin.            -> Mira, trust, Old Tobin: "distrusts"
    Mira no longer trusts Old Tobin.     -> the same fact, ended
    Sela is Old Tobin's daughter.        -> Sela, kin, Old Tobin: "is the daughter of"
    Sela, Old Tobin's daughter, ...      -> the same
    Mira and Sela are friends.           -> Mira, bond, Sela: "is a friend of"
    米拉不信任老托宾 / 老托宾的女儿是塞拉   -> the same in Chinese

Nothing else is guessed, so the answer is {"facts": []} for a turn that states no relationship.
"""

from __future__ import annotations

import re
from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes

VERBS = {
    "trusts": "trust", "distrusts": "trust", "suspects": "trust",
    "loves": "feeling", "hates": "feeling", "fears": "feeling", "resents": "feeling", "admires": "feeling", "pities": "feeling",
    "serves": "duty", "works for": "duty", "owes money to": "duty",
    "hides something from": "secret",
}
KIN = ("daughter", "son", "father", "mother", "sister", "brother", "wife", "husband", "niece", "nephew", "uncle", "aunt", "cousin")
BONDS = {"friend": "bond", "rival": "bond", "enemy": "bond", "ally": "bond", "employer": "duty", "apprentice": "duty"}
PLURAL_BONDS = {"friends": "friend", "rivals": "rival", "enemies": "enemy", "allies": "ally"}
ZH_VERBS = {"不信任": "trust", "信任": "trust", "怀疑": "trust", "爱着": "feeling", "害怕": "feeling", "怨恨": "feeling",
            "敬佩": "feeling", "效忠于": "duty", "受雇于": "duty", "瞒着": "secret"}
ZH_KIN = {"父亲": "kin", "母亲": "kin", "女儿": "kin", "儿子": "kin", "姐姐": "kin", "妹妹": "kin", "哥哥": "kin", "弟弟": "kin",
          "朋友": "bond", "对手": "bond", "盟友": "bond"}
MAX_FACTS = 8


def _names(inputs: dict[str, Any]) -> dict[str, str]:
    """Every name and alias of the characters the extractor lists -> the name to answer with."""
    names: dict[str, str] = {}
    for character in inputs.get("characters") or []:
        if isinstance(character, dict) and character.get("name"):
            for name in [character["name"], *(character.get("aliases") or [])]:
                names.setdefault(str(name), str(character["name"]))
    return names


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?。！？\n])\s*", text) if part.strip()]


def _alternation(names: dict[str, str]) -> str:
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


def facts_in(text: str, names: dict[str, str]) -> list[dict[str, Any]]:
    """The relationship facts a text states between two of the named characters."""
    if not names:
        return []
    who = _alternation(names)
    verbs = "|".join(re.escape(verb) for verb in sorted(VERBS, key=len, reverse=True))
    kin = "|".join([*KIN, *BONDS])
    patterns = (
        (re.compile(rf"(?<!\w)(?P<a>{who})(?!\w) (?:now |still |clearly |openly |plainly )?(?P<verb>{verbs}) (?P<b>{who})(?!\w)", re.I), "verb"),
        (re.compile(rf"(?<!\w)(?P<a>{who})(?!\w) (?:now )?no longer (?P<verb>{verbs}) (?P<b>{who})(?!\w)", re.I), "ended"),
        (re.compile(rf"(?<!\w)(?P<a>{who}) is (?:now )?(?P<b>{who})'s (?P<kin>{kin})\b", re.I), "kin"),
        (re.compile(rf"(?<!\w)(?P<a>{who}), (?P<b>{who})'s (?P<kin>{kin})\b", re.I), "kin"),
        (re.compile(rf"(?<!\w)(?P<a>{who}) and (?P<b>{who}) are (?:old |close |bitter )?(?P<bond>friends|rivals|enemies|allies)\b", re.I), "bond"),
        (re.compile(rf"(?P<a>{who})(?P<no>不再)?(?P<verb>{'|'.join(ZH_VERBS)})(?P<b>{who})"), "zh-verb"),
        (re.compile(rf"(?P<b>{who})的(?P<kin>{'|'.join(ZH_KIN)})是(?P<a>{who})"), "zh-kin"),
    )
    canonical = {name.casefold(): answer for name, answer in names.items()}
    facts: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for sentence in _sentences(text):
        for pattern, kind in patterns:
            for match in pattern.finditer(sentence):
                a, b = canonical[match["a"].casefold()], canonical[match["b"].casefold()]
                if a == b:
                    continue
                if kind in ("verb", "ended"):
                    verb = match["verb"].lower()
                    fact = {"subject": a, "relation": VERBS[verb], "object": b, "state": verb}
                    if kind == "ended":
                        fact["ended"] = True
                elif kind == "kin":
                    word = match["kin"].lower()
                    article = "the" if word in KIN else "an" if word[0] in "aeiou" else "a"
                    fact = {"subject": a, "relation": "kin" if word in KIN else BONDS[word], "object": b, "state": f"is {article} {word} of"}
                elif kind == "bond":
                    word = PLURAL_BONDS[match["bond"].lower()]
                    article = "an" if word[0] in "aeiou" else "a"
                    fact = {"subject": a, "relation": "bond", "object": b, "state": f"is {article} {word} of"}
                elif kind == "zh-verb":
                    fact = {"subject": a, "relation": ZH_VERBS[match["verb"]], "object": b, "state": match["verb"]}
                    if match["no"]:
                        fact["ended"] = True
                else:
                    # "老托宾的女儿是塞拉": Old Tobin's daughter is Sela -> subject 老托宾, state "的女儿是", object 塞拉.
                    a, b = b, a
                    fact = {"subject": a, "relation": ZH_KIN[match["kin"]], "object": b, "state": f"的{match['kin']}是"}
                key = (fact["subject"], fact["relation"], fact["object"])
                if key in seen or len(facts) >= MAX_FACTS:
                    continue
                seen.add(key)
                facts.append({**fact, "evidence": sentence[:200]})
    return facts


@writes("npc-graph.facts@1")
def relationship_facts(reply: WriterCall) -> dict[str, Any]:
    story = reply.inputs.get("story") if isinstance(reply.inputs.get("story"), str) else ""
    open_now = {str(line) for line in reply.inputs.get("open") or []}
    facts = []
    for fact in facts_in(f"{reply.player_text}\n{story}", _names(reply.inputs)):
        # A relationship that already stands this way is no change (a real model leaves it out too).
        spaced = fact["state"].isascii()
        shown = (f"{fact['subject']} {fact['state']} {fact['object']}" if spaced else f"{fact['subject']}{fact['state']}{fact['object']}")
        if not fact.get("ended") and f"{shown} [{fact['relation']}]" in open_now:
            continue
        facts.append(fact)
    return {"facts": facts}
