"""Hostile files: each refused with INVALID_ARGUMENT, reason IMPORT_REFUSED, naming the field, before it costs
more than its bound; nothing is left in the worlds folder."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import grpc
import pytest

from services.registry.importing import limits
from services.registry.importing.importer import import_bytes
from shared.errors import ServiceError
from tests.importing import cards


def refusal(data: bytes, tmp_path: Path) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        import_bytes(data, tmp_path / "worlds", "hostile")
    error = caught.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.reason == "IMPORT_REFUSED"
    assert not (tmp_path / "worlds" / "hostile").exists()
    assert not list((tmp_path / "worlds").glob(".import-*")) if (tmp_path / "worlds").exists() else True
    return error


def field_of(error: ServiceError) -> str:
    return error.violations[0].field


def test_an_oversized_text_chunk(tmp_path: Path) -> None:
    big = cards.png(texts={"ccv3": b"A" * (limits.TEXT_CHUNK_MAX + 4)})
    assert field_of(refusal(big, tmp_path)) == "file.tEXt.ccv3"


def test_a_chunk_longer_than_the_file_and_a_bad_crc(tmp_path: Path) -> None:
    lying = cards.PNG_SIGNATURE + cards.chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + struct.pack(">I", 2**31) + b"tEXt"
    assert "left" in refusal(lying, tmp_path).violations[0].description
    damaged = cards.PNG_SIGNATURE + cards.chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0), crc=1)
    assert field_of(refusal(damaged, tmp_path)) == "file.IHDR"


def test_an_image_too_large_and_a_png_without_a_card(tmp_path: Path) -> None:
    huge = cards.png(width=100_000, height=100_000, texts={"ccv3": cards.b64json(cards.v3_card())})
    assert "pixels" in refusal(huge, tmp_path).message
    assert field_of(refusal(cards.png(), tmp_path)) == "file.tEXt"


def test_bad_base64_and_bad_json(tmp_path: Path) -> None:
    assert field_of(refusal(cards.png(texts={"ccv3": b"not*base64!"}), tmp_path)) == "tEXt.ccv3"
    assert field_of(refusal(cards.png(texts={"chara": b"bm90IGpzb24="}), tmp_path)) == "tEXt.chara"
    deep = ("[" * 5000 + "]" * 5000).encode()
    assert field_of(refusal(deep, tmp_path)) == "file"


def test_a_decompression_bomb(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(cards.v3_card()))
        archive.writestr("assets/other/bomb.bin", b"\0" * (limits.ZIP_MEMBER_MAX - 1))
    error = refusal(out.getvalue(), tmp_path)
    assert field_of(error) == "file:assets/other/bomb.bin" and "bomb" in error.message


def test_a_bomb_that_lies_about_its_size(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(cards.v3_card()))
        archive.writestr("x.bin", b"\0" * 3_000_000)
    data = bytearray(out.getvalue())
    # the declared uncompressed size in the central directory says 10 bytes
    central = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 10)
    assert "x.bin" in field_of(refusal(bytes(data), tmp_path))


def test_zip_rules(tmp_path: Path) -> None:
    for name in ("../evil.txt", "/abs.txt", "C:/x.txt"):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            archive.writestr("card.json", json.dumps(cards.v3_card()))
            archive.writestr(name, b"x")
        assert "relative path" in refusal(out.getvalue(), tmp_path).message
    assert field_of(refusal(cards.charx(cards.v3_card(), {}) [:-30], tmp_path)) == "file"
    missing = cards.charx(cards.v3_card(assets=[{"type": "icon", "uri": "embeded://assets/none.png", "name": "x", "ext": "png"}]))
    assert field_of(refusal(missing, tmp_path)) == "data.assets[0].uri"
    too_wide = cards.charx(cards.v3_card(assets=[{"type": "icon", "uri": "embeded://a.png", "name": "x", "ext": "png"}]),
                           {"a.png": cards.png(width=20_000, height=2)})
    assert field_of(refusal(too_wide, tmp_path)) == "data.assets[0].uri"
    without = io.BytesIO()
    with zipfile.ZipFile(without, "w") as archive:
        archive.writestr("other.json", "{}")
    assert field_of(refusal(without.getvalue(), tmp_path)) == "card.json"


def test_ten_thousand_entries(tmp_path: Path) -> None:
    card = cards.v2_card()
    card["data"]["character_book"]["entries"] = [cards.book_entry(i, [f"k{i}"], "x") for i in range(10_000)]
    error = refusal(json.dumps(card).encode(), tmp_path)
    assert field_of(error) == "data.character_book.entries" and "10000" in error.message
    info = cards.world_info(10_000)
    assert field_of(refusal(json.dumps(info).encode(), tmp_path)) == "entries"


def test_fields_of_the_wrong_kind_are_named(tmp_path: Path) -> None:
    assert field_of(refusal(json.dumps(cards.v2_card(name=7)).encode(), tmp_path)) == "data.name"
    assert field_of(refusal(json.dumps(cards.v2_card(alternate_greetings="hi")).encode(), tmp_path)) == "data.alternate_greetings"
    bad_keys = cards.v2_card(character_book={"entries": [cards.book_entry(1, "lamp", "x")]})  # type: ignore[arg-type]
    assert field_of(refusal(json.dumps(bad_keys).encode(), tmp_path)) == "data.character_book.entries[0].keys"
    long_key = cards.v2_card(character_book={"entries": [cards.book_entry(1, ["k" * 300], "x")]})
    assert "lorebook" in field_of(refusal(json.dumps(long_key).encode(), tmp_path))
    assert field_of(refusal(json.dumps({"spec": "chara_card_v9", "data": {}}).encode(), tmp_path)) == "spec"
    lookbehind = cards.v2_card(character_book={"entries": [cards.book_entry(1, ["fine", "/(?<=a)b/i"], "x")]})
    assert field_of(refusal(json.dumps(lookbehind).encode(), tmp_path)) == "data.character_book.entries[0].keys[1]"
    assert field_of(refusal(b"x" * (limits.FILE_MAX + 1), tmp_path)) == "file"


def test_a_lorebook_past_what_a_world_file_holds(tmp_path: Path) -> None:
    card = cards.v2_card()
    card["data"]["character_book"]["entries"] = [cards.book_entry(i, [f"k{i}"], "x" * 4000) for i in range(400)]
    error = refusal(json.dumps(card).encode(), tmp_path)
    assert field_of(error) == "data.character_book.entries" and "KiB" in error.message
