"""A card's assets as world media: `media/<type>/<name>.<ext>` files of the package, listed in world.yaml's
`media[]` ({type, name, path}). The card's own PNG is its `ccdefault:` icon; a CHARX's `embeded://<path>` is
that member. Images must say their size in their header (imagesize) and be at most IMAGE_SIDE_MAX a side.
A `data:` URI (base64) is decoded; a remote URI is not fetched: it is kept verbatim."""

from __future__ import annotations

import base64
import binascii
import io
import re
from typing import Any

import imagesize

from services.registry.importing.card_source import ImportSource
from services.registry.importing.limits import ASSETS_MAX, IMAGE_SIDE_MAX, refused
from services.registry.importing.png_text import with_texts

IMAGE_EXTS = frozenset({"png", "apng", "jpg", "jpeg", "webp", "gif", "avif"})
DEFAULT_URI = "ccdefault:"
EMBEDDED = ("embeded://", "embedded://")
MEDIA_DIR = "media"
CARD_CHUNKS = ("chara", "ccv3")


def card_media(source: ImportSource) -> tuple[list[dict[str, str]], dict[str, bytes], list[Any]]:
    """(media[], files by package path, assets kept verbatim)."""
    assets = source.data.get("assets")
    if assets is None:
        assets = [{"type": "icon", "uri": DEFAULT_URI, "name": "main", "ext": "png"}] if source.image else []
    if not isinstance(assets, list):
        raise refused("data.assets", "is not a list")
    if len(assets) > ASSETS_MAX:
        raise refused("data.assets", f"holds {len(assets)} assets; at most {ASSETS_MAX}")
    media: list[dict[str, str]] = []
    files: dict[str, bytes] = {}
    kept: list[Any] = []
    for index, asset in enumerate(assets):
        at = f"data.assets[{index}]"
        body = _asset_body(source, asset, at)
        if body is None:
            kept.append(asset)
            continue
        kind, name, ext = _part(asset, "type", at), _part(asset, "name", at), _part(asset, "ext", at).lower()
        if ext in IMAGE_EXTS:
            check_image(body, f"{at}.uri")
        path = f"{MEDIA_DIR}/{kind}/{name}.{ext}"
        while path in files:
            name += "_"
            path = f"{MEDIA_DIR}/{kind}/{name}.{ext}"
        files[path] = body
        media.append({"type": kind, "name": name, "path": path})
    return media, files, kept


def _asset_body(source: ImportSource, asset: Any, at: str) -> bytes | None:
    if not isinstance(asset, dict) or not isinstance(asset.get("uri"), str):
        raise refused(f"{at}.uri", "an asset is {type, uri, name, ext} with a text uri")
    uri = asset["uri"]
    if uri == DEFAULT_URI:  # the card's own image, less the card it carries
        return with_texts(source.image, {}, dropped=CARD_CHUNKS) if source.image is not None else None
    if uri.startswith("data:"):
        header, comma, payload = uri.partition(",")
        if not comma or not header.endswith(";base64"):
            raise refused(f"{at}.uri", "is a data: URI that is not base64 (data:<type>;base64,<data>)")
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise refused(f"{at}.uri", "is a data: URI whose base64 is not valid") from None
    if uri.startswith(EMBEDDED):
        path = uri.split("://", 1)[1]
        if path not in source.files:
            raise refused(f"{at}.uri", f"names {path[:200]!r}, which the CHARX does not hold")
        return source.files[path]
    return None


def _part(asset: dict[str, Any], name: str, at: str) -> str:
    value = asset.get(name)
    if not isinstance(value, str):
        raise refused(f"{at}.{name}", "must be a text")
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("._")[:80]
    return cleaned or ("png" if name == "ext" else "asset")


def check_image(body: bytes, at: str) -> None:
    try:
        width, height = imagesize.get(io.BytesIO(body))
    except (ValueError, OSError):
        width = height = -1
    if width <= 0 or height <= 0:
        raise refused(at, "is an image whose size its header does not say")
    if width > IMAGE_SIDE_MAX or height > IMAGE_SIDE_MAX:
        raise refused(at, f"is {width}x{height} pixels; an image is at most {IMAGE_SIDE_MAX} a side")
