"""Locale variants of a manifest (`PLUGIN.zh.md`, `RUNTIME.zh.md`): the translated body and segments,
checked against the main file, which alone decides structure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.registry.diagnostics import DiagnosticBag
from services.registry.frontmatter import Document, parse_document
from services.registry.manifest_reading import exact_child, read_text

VARIANT_LOCALES = ("zh",)


@dataclass
class Variant:
    """One locale variant file: its body (the prompt's translation) and its translated segments."""

    file: str
    body: str
    segments: dict[str, str]


def locale_variants(folder: Path, main_file: str, main: Document, bag: DiagnosticBag, package_root: Path) -> dict[str, Variant]:
    """Prompt variants (`PLUGIN.zh.md`, `RUNTIME.zh.md`): the body and the fixed segments' content.

    The variant's frontmatter may be empty. Besides `contributes.prompt[].content` (matched to
    the main file's segment by `id`), whatever it writes must be what the main file says:
    structure (contracts, tools, stage, timeouts, segment ids and positions) comes from the
    main file only."""
    stem = main_file[: -len(".md")]
    variants: dict[str, Variant] = {}
    for locale in VARIANT_LOCALES:
        name = f"{stem}.{locale}.md"
        present, _ = exact_child(folder, name)
        if not present:
            continue
        file = (folder / name).relative_to(package_root).as_posix()
        text = read_text(folder / name, bag, file)
        if text is None:
            continue
        document = parse_document(text, bag, file)
        if document is None:
            continue
        segments = _variant_frontmatter(main.data, document.data, bag, file=file, main_file=main_file, locale=locale)
        if document.body or segments:
            variants[locale] = Variant(file, document.body, segments)
    return variants


def _variant_mismatch(bag: DiagnosticBag, *, file: str, main_file: str, locale: str, path: str) -> None:
    bag.error(
        "variant-frontmatter-mismatch",
        f"the {locale} variant's frontmatter differs from {main_file} at `{path}`",
        file=file,
        field_path=path,
        hint=f"structure comes from {main_file}: in the variant write only the body and contributes.prompt[] "
        "{id, content}; labels are translated in locales/<locale>.yaml",
    )


def _variant_frontmatter(
    main: dict[str, Any], variant: dict[str, Any], bag: DiagnosticBag, *, file: str, main_file: str, locale: str
) -> dict[str, str]:
    """Check a variant's frontmatter against the main file's; the translated segments by id."""
    where = {"file": file, "main_file": main_file, "locale": locale}
    rest = dict(variant)
    contributes = rest.get("contributes")
    translated: dict[str, str] = {}
    if isinstance(contributes, dict) and "prompt" in contributes:
        main_contributes = main["contributes"] if isinstance(main.get("contributes"), dict) else {}
        others = {key: value for key, value in contributes.items() if key != "prompt"}
        for key, value in others.items():
            if key not in main_contributes or main_contributes[key] != value:
                differing = first_difference(main_contributes.get(key), value, f"contributes.{key}") if key in main_contributes else f"contributes.{key}"
                _variant_mismatch(bag, path=differing, **where)
        translated = _variant_segments(main_contributes.get("prompt"), contributes["prompt"], bag, **where)
        rest.pop("contributes")
    for key, value in rest.items():
        if key not in main or main[key] != value:
            _variant_mismatch(bag, path=first_difference(main[key], value, key) if key in main else key, **where)
    return translated


def _variant_segments(main_prompt: Any, variant_prompt: Any, bag: DiagnosticBag, *, file: str, main_file: str, locale: str) -> dict[str, str]:
    """contributes.prompt of a variant: items {content} (the main file's segment at the same position)
    or {id, content}; any other key the main segment's own."""
    if not isinstance(variant_prompt, list):
        bag.error(
            "variant-segment-invalid",
            "`contributes.prompt` of a variant is a list of {id, content}",
            file=file,
            field_path="contributes.prompt",
        )
        return {}
    main_list = [item for item in main_prompt if isinstance(item, dict)] if isinstance(main_prompt, list) else []
    main_segments = {item["id"]: item for item in main_list if isinstance(item.get("id"), str)}
    translated: dict[str, str] = {}
    seen: dict[str, int] = {}
    for index, item in enumerate(variant_prompt):
        path = f"contributes.prompt[{index}]"
        if isinstance(item, dict) and "id" not in item and index < len(main_list) and isinstance(main_list[index].get("id"), str):
            # Content only: the segment at the same position (a variant cannot move segments).
            item = {"id": main_list[index]["id"], **item}
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            bag.error(
                "variant-segment-invalid",
                f"{main_file} has no contributes.prompt segment at position {index} for this translation to follow"
                if isinstance(item, dict) and "id" not in item
                else "a translated segment is {content} (the segment at the same position) or {id, content}",
                file=file,
                field_path=f"{path}.id" if isinstance(item, dict) else path,
                hint=f"{main_file} has {len(main_list)} segment(s); translate them in order, or name one by id",
            )
            continue
        segment_id = item["id"]
        if segment_id in seen:
            bag.error(
                "duplicate-prompt-id",
                f"`{segment_id}` is translated twice (also at contributes.prompt[{seen[segment_id]}])",
                file=file,
                field_path=f"{path}.id",
            )
            continue
        seen[segment_id] = index
        main_segment = main_segments.get(segment_id)
        if main_segment is None:
            bag.error(
                "variant-unknown-segment",
                f"{main_file} has no contributes.prompt segment `{segment_id}`",
                file=file,
                field_path=f"{path}.id",
                hint="segment ids come from the main file: one of " + (", ".join(main_segments) or "(none)"),
            )
            continue
        for key, value in item.items():
            if key not in ("id", "content") and (key not in main_segment or main_segment[key] != value):
                _variant_mismatch(bag, file=file, main_file=main_file, locale=locale, path=f"{path}.{key}")
        content = item.get("content")
        if content is None:
            continue
        if not isinstance(content, str) or not content.strip():
            bag.error(
                "variant-segment-invalid",
                f"the translation of segment `{segment_id}` must be non-empty text",
                file=file,
                field_path=f"{path}.content",
            )
            continue
        translated[segment_id] = content
    return translated


def first_difference(main: Any, variant: Any, path: str = "") -> str:
    """The first field path where two frontmatters differ, as the author wrote it."""
    if isinstance(main, dict) and isinstance(variant, dict):
        for key in [*main, *(key for key in variant if key not in main)]:
            if main.get(key) != variant.get(key):
                child = f"{path}.{key}" if path else str(key)
                if key in main and key in variant:
                    return first_difference(main[key], variant[key], child)
                return child
    if isinstance(main, list) and isinstance(variant, list) and len(main) == len(variant):
        for index, (left, right) in enumerate(zip(main, variant, strict=True)):
            if left != right:
                return first_difference(left, right, f"{path}[{index}]")
    return path


