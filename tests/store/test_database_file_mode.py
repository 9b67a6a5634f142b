"""The SQLite file is 0600 in a 0700 folder: plugin code in the sandbox (uid 65534), or another user,
cannot read it even where the worker's mount namespace does not hide the data dir."""

from __future__ import annotations

import stat
from pathlib import Path

from services.store.database import create_store_engine


def test_the_sqlite_file_and_its_folder_are_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "covel.db"
    engine = create_store_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        connection.exec_driver_sql("CREATE TABLE probe (x INTEGER)")
        connection.commit()
    engine.dispose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # A file made before (an older install) is made private too.
    path.chmod(0o644)
    create_store_engine(f"sqlite:///{path}").dispose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
