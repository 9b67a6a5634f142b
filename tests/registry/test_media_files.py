"""GetMediaFile's rules (services/registry/media_files.py) on a real catalogue scan: a world's `media[]` files and a
plugin's webview folder are served with their allow-listed type; a path out of the package (`..`, absolute, a
link), a file not declared, a type off the list and a file over the bound are refused with the right status."""

from __future__ import annotations

import shutil

import grpc
import pytest

from services.registry import media_files
from services.registry.catalogue import Catalogue
from shared.errors import ServiceError
from shared.settings import REPO_ROOT

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
WORLD = """name: Tiny
media:
  - {type: background, name: hall, path: pictures/hall.png}
  - {type: music, name: theme, path: music/theme.ogg}
  - {type: note, name: notes, path: notes.txt}
  - {type: background, name: away, path: pictures/away.png}
"""


@pytest.fixture
def snapshot(tmp_path):
    plugins, worlds = tmp_path / "plugins", tmp_path / "worlds"
    shutil.copytree(REPO_ROOT / "tests" / "fixtures" / "web-plugins" / "web-map", plugins / "web-map")
    world = worlds / "tiny"
    (world / "pictures").mkdir(parents=True)
    (world / "music").mkdir()
    (world / "world.yaml").write_text(WORLD)
    (world / "pictures" / "hall.png").write_bytes(PNG)
    (world / "music" / "theme.ogg").write_bytes(b"OggS" + b"\0" * 8)
    (world / "notes.txt").write_text("not served")
    (tmp_path / "secret.png").write_bytes(PNG)
    (world / "pictures" / "away.png").symlink_to(tmp_path / "secret.png")
    catalogue = Catalogue([plugins], builtin_dirs=[], world_dirs=[worlds], pack_files=())
    return catalogue.load_now()


def refused(snapshot, world_id: str, plugin_id: str, path: str) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        media_files.read_media(snapshot, world_id, plugin_id, path)
    return caught.value


def test_declared_files_are_served_with_their_type(snapshot) -> None:
    assert media_files.read_media(snapshot, "tiny", "", "pictures/hall.png") == (PNG, "image/png")
    assert media_files.read_media(snapshot, "tiny", "", "./music/theme.ogg")[1] == "audio/ogg"
    page, kind = media_files.read_media(snapshot, "", "web-map", "ui/map.html")
    assert kind == "text/html; charset=utf-8" and page.startswith(b"<!doctype html>")


@pytest.mark.parametrize(
    "path", ["../secret.png", "pictures/../../secret.png", "/etc/passwd", "C:/x.png", "pictures\\hall.png", ""]
)
def test_a_path_out_of_the_package_is_invalid(snapshot, path) -> None:
    error = refused(snapshot, "tiny", "", path)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.violations[0].field == "path", error


def test_only_declared_files_of_allowed_types_within_the_package(snapshot) -> None:
    for world_id, plugin_id, path in (
        ("tiny", "", "world.yaml"),
        ("tiny", "", "pictures/other.png"),
        ("", "web-map", "server/index.py"),
        ("", "web-map", "PLUGIN.md"),
        ("", "web-map", "schemas/mark.json"),
    ):
        error = refused(snapshot, world_id, plugin_id, path)
        assert error.code == grpc.StatusCode.NOT_FOUND and error.reason == "MEDIA_NOT_DECLARED", (path, error)
    assert refused(snapshot, "tiny", "", "notes.txt").code == grpc.StatusCode.INVALID_ARGUMENT, "a .txt is no type served"
    linked = refused(snapshot, "tiny", "", "pictures/away.png")
    assert linked.code == grpc.StatusCode.INVALID_ARGUMENT and "out of the package" in linked.message
    assert refused(snapshot, "tiny", "web-map", "ui/map.html").code == grpc.StatusCode.INVALID_ARGUMENT, "one owner, not both"
    assert refused(snapshot, "nowhere", "", "pictures/hall.png").code == grpc.StatusCode.NOT_FOUND
    assert refused(snapshot, "", "nothing", "ui/map.html").reason == "PLUGIN_NOT_FOUND"


def test_a_file_over_the_bound_is_refused(snapshot, monkeypatch) -> None:
    monkeypatch.setattr(media_files, "MAX_MEDIA_BYTES", 10)
    error = refused(snapshot, "tiny", "", "pictures/hall.png")
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and "at most 10" in error.message
