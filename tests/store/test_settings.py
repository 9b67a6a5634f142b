"""Store settings from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.store.settings import StoreSettings


def test_default_database_is_a_sqlite_file_in_the_data_dir(tmp_path, monkeypatch):
    data_dir = tmp_path / "not-yet"
    monkeypatch.setenv("COVEL_DATA_DIR", str(data_dir))
    monkeypatch.delenv("COVEL_STORE_DATABASE_URL", raising=False)
    settings = StoreSettings()
    assert settings.database_url() == f"sqlite:///{data_dir.resolve() / 'covel.db'}"
    assert data_dir.is_dir()


def test_database_url_and_schema_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("COVEL_STORE_DATABASE_URL", "postgresql+psycopg://u@db:5432/covel")
    monkeypatch.setenv("COVEL_STORE_DATABASE_SCHEMA", "covel_prod")
    settings = StoreSettings()
    assert settings.database_url() == "postgresql+psycopg://u@db:5432/covel"
    assert settings.store_database_schema == "covel_prod"
    monkeypatch.setenv("COVEL_STORE_DATABASE_SCHEMA", 'x"; drop')
    with pytest.raises(ValidationError):
        StoreSettings()
