"""A world's data sources (`data:`): their files found inside the package, their records read, and
the records checked for the plugins that accept their contract (schema, references, fields the
model never sees). The checked records stay on the world: world_import.py hands them to sessions.

`source.path` is relative to world.yaml; its last segment may be `*.<ext>` (`data/rules/*.yaml`):
each such file of that folder is a source, in file-name order. Files are `.yaml`/`.yml`/`.json`
(`kind: list`, the default: a list of records keyed by their `key` field, `id` unless written;
`kind: map`: a mapping of key -> record; `kind: document`: the whole file is one record) or
`.md`/`.txt` (a document `{text}`). Unwritten, `kind` is `list` for a file holding a list and
`document` for one holding anything else. `key` names the field that holds a record's key (`id`
unless written); a document without that field is keyed by its file's stem.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jsonschema.exceptions import SchemaError

from services.registry.diagnostics import DiagnosticBag, format_path
from services.registry.loaded_package import LoadedPackage
from services.registry.loaded_world import WORLD_FILE, LoadedWorld, WorldDataSource
from services.registry.manifest_fields import DATASET_OPS
from services.registry.manifest_reading import read_text
from services.registry.package_files import MAX_JSON_BYTES, PackageFiles
from services.registry.world_data_translations import translated_records
from services.registry.world_files import read_yaml_file
from services.registry.world_models import CONTRACT_TARGET_PREFIX, WorldManifest
from services.registry.world_references import Record, ReferenceChecker
from shared import json_schemas

HIDDEN_PREFIX = "_hidden."
GLOB = re.compile(r"^\*\.(?P<ext>[A-Za-z0-9]{1,16})$")
# The locale of a data file's translation (`facts.zh.yaml`), as world.<locale>.yaml's.
LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
STRUCTURED = ("yaml", "yml", "json")
TEXT = ("md", "txt")
# What one session imports at most (CreateSession carries it to the store in one message).
MAX_IMPORT_RECORDS = 20_000
MAX_IMPORT_BYTES = 16 * 1024 * 1024
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def _extension(relative: str) -> str:
    return relative.rpartition(".")[2].lower() if "." in relative.rpartition("/")[2] else ""


def _source_files(written: str, files: PackageFiles, bag: DiagnosticBag, where: str) -> tuple[str, ...] | None:
    relative = files.relative(WORLD_FILE, written)
    if relative is None:
        bag.error("file-outside-package", f"`{written}` points outside the world package", field_path=where,
                  hint="write a path inside the package, relative to world.yaml (e.g. data/facts.yaml)")
        return None
    folder, _, last = relative.rpartition("/")
    glob = GLOB.match(last)
    if any(mark in (folder if glob else relative) for mark in "*?[]"):
        bag.error("data-source-glob", f"`{written}`: only the last segment may be a pattern, and only `*.<ext>`", field_path=where,
                  hint="e.g. data/rules/*.yaml")
        return None
    if glob is None:
        if not files.is_file(relative):
            bag.error("file-missing", f"the data file `{written}` does not exist (looked for {relative})", field_path=where,
                      hint=f"add {relative}, or fix the path")
            return None
        return (relative,)
    directory = files.root / (folder or ".")
    if not files.exists_inside(folder or ".") or not directory.is_dir():
        bag.error("file-missing", f"the data folder `{folder or '.'}` does not exist", field_path=where, hint=f"add the folder {folder}")
        return None
    suffix = "." + glob.group("ext")
    found = sorted(child.name for child in directory.iterdir() if child.name.endswith(suffix) and not child.name.startswith("."))
    matched = tuple(f"{folder}/{name}" if folder else name for name in found if files.is_file(f"{folder}/{name}" if folder else name))
    if not matched:
        bag.warning("data-source-empty", f"no `{suffix}` file in {folder or 'the package root'}: this source has no records", field_path=where)
    return matched


def data_sources(manifest: WorldManifest, files: PackageFiles, bag: DiagnosticBag,
                 packages: Sequence[LoadedPackage] = ()) -> list[WorldDataSource]:
    """The `data:` entries with their files, in the order written, then the sources the installed plugins'
    `authoring.source` / `authoring.characterField` find by convention; a broken entry is left out after its diagnostic."""
    sources: list[WorldDataSource] = []
    fields: dict[str, str] = {}
    for index, decl in enumerate(manifest.data or []):
        where = f"data[{index}]"
        common = WorldDataSource(index=index, contract=decl.to.removeprefix(CONTRACT_TARGET_PREFIX), visibility=decl.visibility,
                                 locale_array_keys=tuple(decl.localeArrayKeys or ()), where=where)
        source = _character_source(common, decl.characterField, fields, bag) if decl.characterField is not None else (
            _file_source(common, decl.source.path, decl.source.kind, decl.source.key, files, bag) if decl.source is not None else None)
        if source is not None:
            sources.append(source)
    written = {source.contract for source in sources}
    for source in convention_sources(packages, files, written, len(manifest.data or [])):
        if source.character_field and source.character_field in fields:
            continue  # the world's own `data:` entry took that character field: it wins over a plugin's convention
        found = _character_source(source, source.character_field, fields, bag) if source.character_field else (
            _file_source(source, source.path, source.kind or None, source.key or None, files, bag))
        if found is not None:
            sources.append(found)
    return sources


def _character_source(common: WorldDataSource, field: str, fields: dict[str, str], bag: DiagnosticBag) -> WorldDataSource | None:
    if field in fields:
        bag.error("duplicate-character-field", f"characterField `{field}` is also {fields[field]}'s",
                  field_path=f"{common.where}.characterField", hint="one character field feeds one data source")
        return None
    fields[field] = common.where
    return replace(common, character_field=field)


def _file_source(common: WorldDataSource, path: str, kind: str | None, key: str | None, files: PackageFiles,
                 bag: DiagnosticBag) -> WorldDataSource | None:
    where = common.where
    found = _source_files(path, files, bag, f"{where}.source.path")
    if found is None:
        return None
    kinds = {_extension(relative) for relative in found} or {_extension(path)}
    unknown = sorted(kinds - {*STRUCTURED, *TEXT})
    if unknown:
        bag.error("data-source-format", f"`.{unknown[0]}` files cannot be read as data", field_path=f"{where}.source.path",
                  hint="use .yaml, .yml, .json, .md or .txt")
        return None
    kind = kind or ("document" if kinds <= set(TEXT) else "")
    if kind not in ("document", "") and kinds & set(TEXT):
        bag.error("data-source-kind", f"`kind: {kind}` needs YAML or JSON files; text files are documents",
                  field_path=f"{where}.source.kind", hint="write kind: document, or leave kind out")
        return None
    bases, translations = split_translations(found, files)
    return replace(common, kind=kind, key=key or "", files=bases, translations=translations)


@dataclass(frozen=True)
class _Convention(WorldDataSource):
    """A source found by a plugin namespace's `authoring.source` (its path, kind and key as written there)."""

    path: str = ""


def convention_sources(packages: Sequence[LoadedPackage], files: PackageFiles, written: set[str], first_index: int) -> list[_Convention]:
    """Sources by convention (spec: 按约定导入): a namespace that accepts a contract and names where a world keeps it
    (`authoring.source: {path, kind?, key?}` or `authoring.characterField`) imports what the world has there, without a
    `data:` entry. A contract a `data:` entry already names, or a path the world does not have, adds nothing."""
    found: list[_Convention] = []
    for package in packages:
        if not package.loaded:
            continue
        for namespace, decl in ((package.definition.get("contributes") or {}).get("data") or {}).items():
            accepts = decl.get("accepts") if isinstance(decl, dict) else None
            authoring = decl.get("authoring") if isinstance(decl, dict) else None
            if not accepts or not isinstance(authoring, dict) or accepts[0] in written:
                continue
            common = _Convention(index=first_index + len(found), contract=str(accepts[0]), visibility="public",
                                 where=f"plugin {package.id} contributes.data.{namespace}.authoring")
            source, field = authoring.get("source"), authoring.get("characterField")
            if isinstance(field, str) and field:
                found.append(replace(common, character_field=field))
            elif isinstance(source, dict) and isinstance(source.get("path"), str) and _present(source["path"], files):
                found.append(replace(common, path=source["path"], kind=str(source.get("kind") or ""), key=str(source.get("key") or "")))
            else:
                continue
            written.add(common.contract)
    return found


def _present(path: str, files: PackageFiles) -> bool:
    """Whether the world package has what a conventional path names (a file, or the folder of a `*.ext` pattern)."""
    relative = files.relative(WORLD_FILE, path)
    if relative is None:
        return False
    folder, _, last = relative.rpartition("/")
    return files.exists_inside(folder or ".") if GLOB.match(last) else files.is_file(relative)


def split_translations(found: tuple[str, ...], files: PackageFiles) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]:
    """The data files, and each one's translations: `facts.zh.yaml` translates `facts.yaml` (a pattern matches
    both; the translation is not a source of its own). Each folder is listed once."""
    bases = [relative for relative in found if _translated_file(relative) is None or _translated_file(relative) not in found]
    named: dict[str, list[tuple[str, str]]] = {base: [] for base in bases}
    for folder in dict.fromkeys(base.rpartition("/")[0] for base in bases):
        if not files.exists_inside(folder or "."):
            continue
        for child in sorted((files.root / (folder or ".")).iterdir()):
            relative = f"{folder}/{child.name}" if folder else child.name
            base = _translated_file(relative)
            if base in named and files.is_file(relative):
                named[base].append((relative.rpartition(".")[0].rpartition(".")[2], relative))
    return tuple(bases), tuple((base, tuple(pairs)) for base, pairs in named.items() if pairs)


def _translated_file(relative: str) -> str | None:
    """`facts.yaml` for `facts.zh.yaml`; None for a file whose name holds no locale."""
    stem, _, extension = relative.rpartition(".")
    base, dot, locale = stem.rpartition(".")
    return f"{base}.{extension}" if dot and base and not base.endswith("/") and LOCALE.match(locale) else None


def _file_value(relative: str, files: PackageFiles, bag: DiagnosticBag) -> Any:
    extension = _extension(relative)
    if extension in ("yaml", "yml"):
        return read_yaml_file(files, relative, bag, code="data-file-yaml")
    text = read_text(files.root / relative, bag, relative)
    if text is None:
        return None
    if extension in TEXT:
        return {"text": text}
    if len(text.encode("utf-8")) > MAX_JSON_BYTES:
        bag.error("file-too-large", f"the data file is larger than {MAX_JSON_BYTES // 1024} KiB", file=relative)
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        bag.error("invalid-json", f"not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}", file=relative)
        return None


def _file_records(source: WorldDataSource, relative: str, value: Any, bag: DiagnosticBag) -> Iterator[tuple[str, Record]]:
    kind = source.kind or ("list" if isinstance(value, list) else "document")
    if kind == "document":
        written = value.get(source.key or "id") if isinstance(value, dict) else None
        key = str(written) if isinstance(written, str | int) and not isinstance(written, bool) and written != "" else (
            relative.rpartition("/")[2].rpartition(".")[0])
        yield key, Record(relative, (), value)
    elif kind == "map":
        if not isinstance(value, dict):
            bag.error("data-file-shape", f"a `kind: map` file holds a mapping of key -> record, not a {type(value).__name__}", file=relative)
            return
        for name, item in value.items():
            yield name, Record(relative, (name,), item)
    else:
        if not isinstance(value, list):
            bag.error("data-file-shape", f"a `kind: list` file holds a list of records, not a {type(value).__name__}", file=relative,
                      hint="write `- {id: …, …}` items, or set source.kind")
            return
        key_field = source.key or "id"
        for index, item in enumerate(value):
            written = item.get(key_field) if isinstance(item, dict) else None
            if not isinstance(written, str | int) or isinstance(written, bool) or written == "":
                bag.error("data-record-key", f"the record has no `{key_field}` to key it by", file=relative, field_path=format_path((index,)),
                          hint=f"give every record its `{key_field}`, or name another field as source.key")
                continue
            yield str(written), Record(relative, (index,), item)


def read_records(world: LoadedWorld, source: WorldDataSource, files: PackageFiles, bag: DiagnosticBag) -> list[tuple[str, Record]]:
    """(key, record) of one source, in file-name order; keys are unique within the source."""
    if source.character_field:
        positions = {character["id"]: index for index, character in enumerate(world.characters)}
        prefix = (world.characters_prefix,) if world.characters_prefix else ()
        return [(character_id, Record(world.characters_file, (*prefix, positions[character_id], source.character_field), value))
                for character_id, value in world.character_data.get(source.character_field, {}).items()]
    records: list[tuple[str, Record]] = []
    seen: dict[str, str] = {}
    for relative in source.files:
        value = _file_value(relative, files, bag)
        if value is None:
            continue
        for key, record in _file_records(source, relative, value, bag):
            if key in seen:
                bag.error("duplicate-data-key", f"key `{key}` is also in {seen[key]}; the records of one source need their own keys",
                          file=relative, field_path=format_path(record.location))
                continue
            seen[key] = relative
            records.append((key, record))
    return records


def receivers(contract: str, packages: Sequence[LoadedPackage]) -> list[tuple[str, str, dict[str, Any]]]:
    """(plugin id, namespace, its declaration) of every loaded namespace that accepts `contract`."""
    found = []
    for package in packages:
        if not package.loaded:
            continue
        data = (package.definition.get("contributes") or {}).get("data") or {}
        for namespace, decl in data.items():
            if isinstance(decl, dict) and contract in (decl.get("accepts") or []):
                found.append((package.id, namespace, decl))
    return found


def _namespace_validator(package: LoadedPackage, decl: dict[str, Any]) -> Any:
    """The namespace's record schema, or None when it has none the world can be checked against."""
    written = decl.get("schema")
    if not isinstance(written, str):
        return None
    _, schema = PackageFiles(package.root_dir).json_file(written, DiagnosticBag(plugin_id=package.id), file="PLUGIN.md",
                                                         field_path="", what="schema", require_object=True)
    try:
        return json_schemas.checked_validator(schema) if schema is not None else None
    except (SchemaError, json_schemas.PatternError):
        return None  # the plugin's own problem, reported on the plugin


def _is_uuid(value: Any) -> bool:
    return isinstance(value, str) and bool(_UUID.match(value))


def _bookkeeping(key: str, value: Any) -> bool:
    """The kernel's rule for what a model never reads (spec: 模型看不到的簿记字段), references aside."""
    if key == "sessionId":
        return True
    if key == "id" or key.endswith(("Id", "Ids")):
        return _is_uuid(value) or (isinstance(value, list) and bool(value) and all(_is_uuid(entry) for entry in value))
    return (key == "timestamp" or key.endswith("At")) and isinstance(value, str) and bool(_ISO_TIME.match(value))


def hidden_fields(value: Any, at: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Fields the kernel leaves out of what a model reads (bookkeeping ids and times): (where, name)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if _bookkeeping(key, item):
                yield (*at, key), key
            yield from hidden_fields(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from hidden_fields(item, (*at, index))


def remind_hidden_fields(record: Record, bag: DiagnosticBag) -> None:
    for where, name in hidden_fields(record.value):
        bag.warning("model-hidden-field", f"`{name}` holds a UUID or an ISO time: models never read it (it looks like bookkeeping)",
                    file=record.file, field_path=format_path((*record.location, *where)),
                    hint="to show it to the story, rename it (date, diedOn) or write it another way (\"the morning of 1 June 1943\")")


def check_records(world: LoadedWorld, files: PackageFiles, bag: DiagnosticBag, packages: Sequence[LoadedPackage]) -> None:
    """Every source's records (and their translations) against the namespaces receiving its contract; characters
    for hidden fields. The checked records are kept on the world for the sessions that import them."""
    references = ReferenceChecker(world, bag)
    prefix = (world.characters_prefix,) if world.characters_prefix else ()
    for index, character in enumerate(world.characters):
        remind_hidden_fields(Record(world.characters_file, (*prefix, index), character), bag)
    by_id = {package.id: package for package in packages}
    for source in world.data_sources:
        found = receivers(source.contract, packages)
        if not found:
            bag.warning("data-no-receiver", f"no installed plugin accepts contract {source.contract}; this data reaches no session",
                        field_path=f"{source.where}.to", hint="install a plugin whose contributes.data accepts it, or fix the contract id")
        records = read_records(world, source, files, bag)
        for _, record in records:
            remind_hidden_fields(record, bag)
        translated = translated_records(source, records, functools.partial(_translation_records, source, files=files, bag=bag), bag)
        world.records.append((source, records))
        for locale, localized in translated.items():
            world.translated_records.setdefault(locale, []).append((source, localized))
        for plugin_id, namespace, decl in found:
            receiver = f"plugin {plugin_id} ({namespace})"
            _check_dataset(by_id[plugin_id], HIDDEN_PREFIX + namespace if source.visibility == "hidden" else namespace,
                           records, source, receiver, bag)
            validator = _namespace_validator(by_id[plugin_id], decl)
            declared = (decl.get("authoring") or {}).get("references")
            for _, record in records:
                if validator is not None:
                    _check_schema(validator, record, receiver, bag)
                if isinstance(declared, list):
                    references.check(record, [item for item in declared if isinstance(item, dict)], receiver)
            for locale, localized in translated.items():
                for _, record in localized:
                    if validator is not None:
                        _check_schema(validator, record, f"{receiver}, in {locale}", bag)
    _check_size(world, bag)


def _check_dataset(package: LoadedPackage, stored: str, records: list[tuple[str, Record]], source: WorldDataSource,
                   receiver: str, bag: DiagnosticBag) -> None:
    """The receiving namespace's dataset rules (`contributes.datasets.<namespace as stored>`), as the store applies
    them to the import: a whole record is a set, and it must fit the dataset's schema."""
    declared = ((package.definition.get("contributes") or {}).get("datasets") or {}).get(stored)
    if not isinstance(declared, dict):
        return
    ops = declared.get("ops") or DATASET_OPS
    if "set" not in ops:
        bag.error("data-dataset-refuses", f"{receiver}: its dataset {stored} does not allow set, so it cannot receive world data",
                  field_path=f"{source.where}.to", hint="send this contract to a namespace whose dataset allows set")
        return
    validator = _namespace_validator(package, declared)
    for _, record in records if validator is not None else []:
        _check_schema(validator, record, f"{receiver}, dataset {stored}", bag)


def _translation_records(source: WorldDataSource, relative: str, *, files: PackageFiles, bag: DiagnosticBag) -> list[tuple[str, Record]]:
    value = _file_value(relative, files, bag)
    return [] if value is None else list(_file_records(source, relative, value, bag))


def _check_size(world: LoadedWorld, bag: DiagnosticBag) -> None:
    """What a session imports stays within what one CreateSession carries (the largest language counts)."""
    for records in (world.records, *world.translated_records.values()):
        count = sum(len(found) for _, found in records)
        size = sum(len(json.dumps(record.value, ensure_ascii=False, default=str)) for _, found in records for _, record in found)
        if count > MAX_IMPORT_RECORDS or size > MAX_IMPORT_BYTES:
            bag.error("data-too-large", f"the world's data is {count} records, {size // 1024} KiB of JSON; a session imports at most "
                      f"{MAX_IMPORT_RECORDS} records and {MAX_IMPORT_BYTES // (1024 * 1024)} MiB", field_path="data",
                      hint="split the world, or keep large texts in fewer, smaller records")
            return


def _check_schema(validator: Any, record: Record, receiver: str, bag: DiagnosticBag) -> None:
    for error in sorted(validator.iter_errors(record.value), key=lambda item: list(item.absolute_path))[:3]:
        bag.error("data-record-invalid", f"{receiver} refuses this record: {error.message}", file=record.file,
                  field_path=format_path((*record.location, *error.absolute_path)), hint="change the record to fit the plugin's schema")
