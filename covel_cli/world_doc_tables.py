"""The field tables of docs/worlds.md, generated from the world package models
(services/registry/world_models.py) by covel_cli/doc_tables.py (`world-fields:<Model>` blocks).

Every field of every model needs its meaning here, so a new field fails
tests/docs/test_generated_tables.py until it is described.
"""

from __future__ import annotations

import json
import typing

from pydantic import BaseModel

from covel_cli.manifest_doc_tables import MANIFEST_MEANINGS, author_type
from covel_cli.table_cells import MissingMeaning
from services.registry import world_models as world
from services.registry.manifest_models import Author, AuthorLink
from shared.lorebook_rules import ACTIVATION_DEFAULTS, SETTINGS_DEFAULTS

# The models, in the order docs/worlds.md shows them, with where a world author writes each.
WORLD_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "WorldManifest": (world.WorldManifest, "`world.yaml`"),
    "CharacterDecl": (world.CharacterDecl, "`characters[]` (or each item of the characters file)"),
    "CharacterSchemaDecl": (world.CharacterSchemaDecl, "`characterSchema`"),
    "AttributeDecl": (world.AttributeDecl, "`characterSchema.attributes.<id>`"),
    "DimensionDecl": (world.DimensionDecl, "`dimensions.<id>`"),
    "PluginPolicy": (world.PluginPolicy, "`pluginPolicy`"),
    "DataSourceDecl": (world.DataSourceDecl, "`data[]`"),
    "LorebookDecl": (world.LorebookDecl, "`lorebook[]` (or each item of the lorebook file)"),
    "LorebookActivation": (world.LorebookActivation, "`lorebook[].activation`"),
    "LorebookSettings": (world.LorebookSettings, "`lorebookSettings`"),
    "OpeningDecl": (world.OpeningDecl, "`openings[]`"),
    "MediaDecl": (world.MediaDecl, "`media[]`"),
    "DataSourceFile": (world.DataSourceFile, "`data[].source`"),
    "WorldTranslation": (world.WorldTranslation, "`world.<locale>.yaml`"),
    "AuthorTranslation": (world.AuthorTranslation, "`world.<locale>.yaml`: `author`"),
    "CharacterTranslation": (world.CharacterTranslation, "`world.<locale>.yaml`: `characters.<id>`"),
    "SchemaTranslation": (world.SchemaTranslation, "`world.<locale>.yaml`: `characterSchema`"),
    "LorebookTranslation": (world.LorebookTranslation, "`world.<locale>.yaml`: `lorebook.<id>`"),
    "NamedTranslation": (world.NamedTranslation, "`world.<locale>.yaml`: `characterSchema.attributes.<id>`, `dimensions.<id>`"),
    "LinkLabel": (world.LinkLabel, "`world.<locale>.yaml`: `author.links[]`"),
    # As in PLUGIN.md (their meanings are the plugin manifest's).
    "Author": (Author, "`author`"),
    "AuthorLink": (AuthorLink, "`author.links[]`"),
}

WORLD_DEFAULTS: dict[str, str] = {
    "WorldManifest.id": "the folder name",
    "WorldManifest.characters": "`characters.yaml` when the package has one",
    "WorldManifest.lorebook": "`lorebook.yaml` when the package has one",
    "CharacterDecl.type": f"`{world.DEFAULT_CHARACTER_TYPE}`",
    "WorldManifest.lorebookSettings": "each of LorebookSettings's defaults",
    "CharacterSchemaDecl.types": "`[player, npc]`",
    "AttributeDecl.type": "`string`",
    "DataSourceDecl.visibility": "`public`",
    "DataSourceFile.kind": "`list` for a file holding a list, else `document`",
    "DataSourceFile.key": "`id`",
}

# The activation rules' defaults, from the one table the kernel reads them from (shared/lorebook_rules.py).
WORLD_DEFAULTS.update({f"LorebookActivation.{name}": f"`{json.dumps(value)}`" for name, value in ACTIVATION_DEFAULTS.items()
                       if value not in (None, [], "")})
WORLD_DEFAULTS.update({f"LorebookSettings.{name}": f"`{json.dumps(value)}`" for name, value in SETTINGS_DEFAULTS.items()})

WORLD_MEANINGS: dict[str, str] = {
    "WorldManifest.id": "The world id; written, it must equal the folder name.",
    "WorldManifest.name": "The world's name, shown in world lists and used as a new session's title.",
    "WorldManifest.description": "A few sentences about the world, for world lists and details.",
    "WorldManifest.version": "The world's version, shown with the author.",
    "WorldManifest.opening": "The first story message of every session in the world.",
    "WorldManifest.characters": "The characters inline, or the path of a YAML file of the package that lists them (see CharacterDecl).",
    "WorldManifest.characterSchema": "The character types and attributes; characters are checked against it.",
    "WorldManifest.dimensions": "Values of the world that change in play, by id, each with a JSON Schema and an initial value.",
    "WorldManifest.pluginPolicy": "Which plugins and contracts a session in the world gets.",
    "WorldManifest.pluginSettings": "Presets of plugins' settings, by plugin id; a player's own values win, key by key.",
    "WorldManifest.data": "Content for the plugins that accept a contract, imported into each new session in the world.",
    "WorldManifest.lorebook": "The lorebook inline, or the path of a YAML file of the package that lists its entries (see LorebookDecl).",
    "LorebookDecl.id": "The entry's id, unique in the world's lorebook.",
    "LorebookDecl.title": "A short title, shown before the content in a prompt.",
    "LorebookDecl.keys": "Words or names that bring it into a story's prompt when the player's input or the latest story text holds one.",
    "LorebookDecl.content": "What the story should know.",
    "LorebookDecl.constant": "In every story prompt, keys or not.",
    "LorebookDecl.disabled": "Kept, but never in a prompt or a search.",
    "LorebookDecl.activation": "When it comes up and where it goes (see LorebookActivation); without it, the defaults.",
    "LorebookDecl.imported": "What an import could not map from a card's entry, verbatim; `covel export` gives it back.",
    "WorldManifest.openings": "More openings a new session may pick (a card's alternate and group-only greetings); `opening` is the default.",
    "WorldManifest.lorebookSettings": "How the lorebook is scanned and how much of a prompt it may take (see LorebookSettings).",
    "WorldManifest.media": "Files of the package the world shows (an imported card's assets; backdrops, portraits, music): the only world files GetMedia serves to clients.",
    "WorldManifest.imported": "What an import could not map, verbatim (`card`, `book`); `covel export` gives it back.",
    "CharacterDecl.personality": "The character's temperament and manner (a card's `personality`).",
    "LorebookActivation.secondaryKeys": "A second set of keys, applied by `selectiveLogic` once a key matched.",
    "LorebookActivation.selectiveLogic": "`andAny` (one secondary key too), `andAll` (all), `notAny` (none), `notAll` (not all).",
    "LorebookActivation.excludeKeys": "Keys that keep it out when any is in the scanned text.",
    "LorebookActivation.useRegex": "Every key is a regular expression (RE2); a key written `/pattern/flags` always is.",
    "LorebookActivation.caseSensitive": "Keys match only in their own case.",
    "LorebookActivation.wholeWords": "Keys match whole words only; unset, whole words where words are spaced, anywhere in Chinese or Japanese.",
    "LorebookActivation.probability": "The chance, in percent, that it comes up when it matched (drawn from the session's seed).",
    "LorebookActivation.order": "Insertion order: lower goes earlier in the prompt; higher wins the budget.",
    "LorebookActivation.position": "`beforeChar` or `afterChar` (the lorebook segment before or after the characters), or `atDepth`.",
    "LorebookActivation.depth": "With `atDepth`: how many messages from the end of the history it goes.",
    "LorebookActivation.role": "With `atDepth`: the role of its message (`system`, `user`, `assistant`).",
    "LorebookActivation.scanDepth": "How many recent messages are scanned for its keys (the lorebook's scanDepth when unset).",
    "LorebookActivation.excludeRecursion": "Another entry's content never brings it up (only the history does).",
    "LorebookActivation.preventRecursion": "Its own content brings no other entry up.",
    "LorebookActivation.delayUntilRecursion": "It comes up only from another entry's content, never from the history alone.",
    "LorebookActivation.sticky": "Once up, it stays up this many more turns.",
    "LorebookActivation.cooldown": "After it was up, it cannot come up again for this many turns.",
    "LorebookActivation.delay": "It cannot come up before this many turns of the session have passed.",
    "LorebookActivation.every": "It can come up only every this many turns (0: any turn).",
    "LorebookActivation.once": "After it was up once, it never comes up again.",
    "LorebookActivation.group": "An inclusion group: of the group's entries that came up, one is kept (by `groupOverride`, then weight).",
    "LorebookActivation.groupWeight": "Its weight in the group's draw.",
    "LorebookActivation.groupOverride": "It wins its group's draw outright (the highest `order` among those that override).",
    "LorebookSettings.scanDepth": "How many recent messages (with the player's input) are scanned for keys.",
    "LorebookSettings.tokenBudget": "At most this many tokens (estimated as characters / 4) of entries in a prompt; constant entries first, then by `order`.",
    "LorebookSettings.recursive": "Entries that came up are scanned in turn for other entries' keys.",
    "LorebookSettings.maxRecursion": "How many rounds of that scan at most.",
    "OpeningDecl.id": "The opening's id, what a new session names to pick it.",
    "OpeningDecl.text": "The first story message when it is picked.",
    "OpeningDecl.groupOnly": "For a group session only (a card's group-only greeting).",
    "MediaDecl.type": "What it is (`icon`, `background`, `emotion`, `user_icon`, ...; a card asset's type).",
    "MediaDecl.name": "Its name (a card asset's name).",
    "MediaDecl.path": "The file, relative to world.yaml.",
    "LorebookTranslation.title": "The title in this language.",
    "LorebookTranslation.content": "The content in this language.",
    "LorebookTranslation.keys": "The keys in this language (they replace the entry's).",
    "WorldTranslation.lorebook": "Lorebook entries by id: their title, content and keys.",
    "WorldManifest.author": "The author: a name, or `{name, url, about, links}` (as in PLUGIN.md; shown, never sent to a model).",
    "WorldManifest.license": "A license name or SPDX id, e.g. `CC-BY-4.0`.",
    "WorldManifest.homepage": "The world's page.",
    "CharacterDecl.id": "The character's id (`npc-lin-yao`), how plugins key their records about it.",
    "CharacterDecl.name": "The name stories use.",
    "CharacterDecl.type": "One of characterSchema.types; `player` for a character a player plays (several are allowed).",
    "CharacterDecl.aliases": "Other names the same character goes by (a name in another language too).",
    "CharacterDecl.description": "Who the character is.",
    "CharacterDecl.attributes": "Values of characterSchema.attributes, by attribute id.",
    "CharacterSchemaDecl.types": "The character types; `player` is always one of them.",
    "CharacterSchemaDecl.attributes": "The attributes a character may have, by id.",
    "AttributeDecl.name": "The attribute's name.",
    "AttributeDecl.description": "What the attribute means.",
    "AttributeDecl.type": "`string`, `number`, `integer`, `boolean` or `list` (of texts or numbers).",
    "AttributeDecl.min": "The lowest value (number and integer attributes).",
    "AttributeDecl.max": "The highest value (number and integer attributes).",
    "AttributeDecl.options": "The values it may take.",
    "AttributeDecl.default": "The value a character without one is read as; checked like a character's.",
    "DimensionDecl.name": "The dimension's name.",
    "DimensionDecl.description": "What it tracks.",
    "DimensionDecl.schema": "A JSON Schema object, or the path of a JSON file of the package holding one.",
    "DimensionDecl.initial": "The value every session starts with; the schema must allow it.",
    "PluginPolicy.preset": "A pack (ListPacks): its requested plugins join a session before `plus`; a pack the kernel lacks is a warning.",
    "PluginPolicy.plus": "Plugins a session in the world requests; those not installed are left out and reported.",
    "PluginPolicy.requires": "Contracts whose provider joins the session (what cannot be met is reported, the session starts).",
    "DataSourceDecl.to": "`contract:<id>`: the plugins whose `contributes.data` namespace accepts that contract receive it.",
    "DataSourceDecl.source": "Files of the package that hold the records (not together with characterField).",
    "DataSourceDecl.characterField": "Instead of files: the field of each character that holds this data (left out of the character).",
    "DataSourceDecl.localeArrayKeys": "Fields that match the items of nested lists with a translation's (after the key and `id`).",
    "DataSourceDecl.visibility": "`hidden`: only the receiving plugin's code reads it (its `_hidden.<namespace>`).",
    "DataSourceFile.kind": "`list` (records), `map` (key → record) or `document` (the file is one record); text files are documents `{text}`.",
    "DataSourceFile.path": "Relative to world.yaml; the last segment may be `*.<ext>` (every such file, in file-name order).",
    "DataSourceFile.key": "The field that holds a record's key; a document without it is keyed by its file's stem.",
    "WorldTranslation.name": "The world's name in this language.",
    "WorldTranslation.description": "Its description.",
    "WorldTranslation.opening": "Its opening.",
    "WorldTranslation.author": "The author's `about` and link labels (never the name).",
    "WorldTranslation.characters": "Characters by id: their name, description and more aliases.",
    "WorldTranslation.characterSchema": "Attribute names and descriptions by id.",
    "WorldTranslation.dimensions": "Dimension names and descriptions by id.",
    "AuthorTranslation.about": "author.about in this language.",
    "AuthorTranslation.links": "The labels of author.links, by position.",
    "CharacterTranslation.name": "The character's name in this language.",
    "CharacterTranslation.description": "Its description.",
    "CharacterTranslation.aliases": "Added to the character's aliases.",
    "SchemaTranslation.attributes": "Attributes by id.",
    "NamedTranslation.name": "The name in this language.",
    "NamedTranslation.description": "The description in this language.",
    "LinkLabel.label": "The link's label in this language.",
}


def world_table(name: str) -> str:
    model, where = WORLD_MODELS[name]
    hints = typing.get_type_hints(model, include_extras=True)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for field_name, info in model.model_fields.items():
        key = f"{name}.{info.alias or field_name}"
        meaning = WORLD_MEANINGS.get(key) or (MANIFEST_MEANINGS.get(key) if model in (Author, AuthorLink) else None)
        if meaning is None:
            raise MissingMeaning(f"{key}: add its meaning to WORLD_MEANINGS in covel_cli/world_doc_tables.py")
        default = "required" if info.is_required() else WORLD_DEFAULTS.get(key, "—")
        rows.append(f"| `{info.alias or field_name}` | {author_type(hints[field_name])} | {default} | {meaning} |")
    return f"#### {name}\n\nWritten at {where}.\n\n" + "\n".join(rows) + "\n"
