"""Plugin data: JSON values a plugin keeps per session under (plugin_id, namespace, key)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, DateTime, Dialect, String, Table, Text, bindparam, select, tuple_
from sqlalchemy import cast as sql_cast
from sqlalchemy import delete as sql_delete
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from services.store.models import PluginDataRow
from shared.plugin_data.operations import MISSING

NAMESPACE_MAX = 200
KEY_MAX = 500


# A declarative class with __tablename__ always maps a Table; DeclarativeBase types __table__ as any FromClause.
_TABLE = cast(Table, PluginDataRow.__table__)
_UPSERTS: dict[str, Any] = {}


def _upsert_statement(dialect: str) -> Any:
    """INSERT ... ON CONFLICT DO UPDATE, built once per dialect (building it costs more than running it).

    `value` is bound as the JSON text the size check already made (encoding it again per row cost
    as much as the rest of the row); both times are the turn's one `now`, bound as the column type
    makes it (see _bound_now)."""
    if dialect not in _UPSERTS:
        postgres = dialect == "postgresql"
        insert = pg_insert if postgres else sqlite_insert
        text = bindparam("value", type_=Text)
        now = bindparam("now", type_=DateTime(timezone=True) if postgres else String())
        columns = ("session_id", "plugin_id", "namespace", "key", "turn_id")
        statement = insert(_TABLE).values({
            **{name: bindparam(name, type_=_TABLE.c[name].type) for name in columns},
            "value": sql_cast(text, JSONB) if postgres else text, "created_at": now, "updated_at": now,
        })
        _UPSERTS[dialect] = statement.on_conflict_do_update(
            index_elements=["session_id", "plugin_id", "namespace", "key"],
            set_={"value": statement.excluded.value, "turn_id": statement.excluded.turn_id, "updated_at": statement.excluded.updated_at},
        )
    return _UPSERTS[dialect]


def _bound_now(dialect: Dialect, now: datetime) -> Any:
    """`now` as the created_at column binds it (SQLite: naive UTC text; PostgreSQL: aware UTC), made
    once a turn: the column's type made it twice a row."""
    process = _TABLE.c.created_at.type.bind_processor(dialect)
    return process(now) if process is not None else now


Address = tuple[str, str, str]  # (plugin_id, namespace, key)
Encoded = tuple[Any, str]  # (a value, its JSON text)


class UnitWrites:
    """Plugin-data writes of a turn, buffered per unit; a value set comes with its JSON text.

    `get` answers as the transaction will see it (committed, earlier units, this unit's
    writes so far). When a unit ends, `flush` writes its final value per entry in two
    statements (one multi-row upsert, one delete), or `keep` adds them to the turn's writes,
    which `flush_turn` writes the same way for every unit at once. `discard` forgets the
    unit's writes (its unit rolled back).
    """

    def __init__(self, connection: Connection, session_id: str, turn_id: str, now: datetime) -> None:
        self.connection, self.session_id, self.turn_id, self.now = connection, session_id, turn_id, now
        self._now = _bound_now(connection.dialect, now)
        self._known: dict[Address, Any] = {}
        self._pending: dict[Address, Encoded] = {}
        self._kept: dict[Address, Encoded] = {}

    def prefetch(self, addresses: set[Address]) -> None:
        wanted = [address for address in addresses if address not in self._known and address not in self._pending]
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for address in chunk:
                self._known[address] = MISSING
            rows = self.connection.execute(_CURRENT_VALUES, {"session_id": self.session_id, "addresses": chunk})
            for plugin_id, namespace, key, value in rows:
                self._known[(plugin_id, namespace, key)] = value

    def get(self, address: Address) -> Any:
        if address in self._pending:
            value, _text = self._pending[address]
            return value
        if address not in self._known:
            self.prefetch({address})
        return self._known[address]

    def set(self, address: Address, value: Any, text: str) -> None:
        """`text`: the value's JSON text (written as it is)."""
        self._pending[address] = (value, text)

    def delete(self, address: Address) -> None:
        self._pending[address] = _DELETE

    def flush(self) -> None:
        self._write(self._pending)
        self._settle()

    def keep(self) -> None:
        self._kept.update(self._pending)
        self._settle()

    def flush_turn(self) -> None:
        self._write(self._kept)
        self._kept.clear()

    def discard(self) -> None:
        self._pending.clear()

    def _settle(self) -> None:
        for address, (value, _text) in self._pending.items():
            self._known[address] = value
        self._pending.clear()

    def _write(self, entries: dict[Address, Encoded]) -> None:
        if not entries:
            return
        values = [
            {"session_id": self.session_id, "plugin_id": plugin_id, "namespace": namespace, "key": key, "value": text,
             "turn_id": self.turn_id, "now": self._now}
            for (plugin_id, namespace, key), (value, text) in entries.items()
            if value is not MISSING
        ]
        gone = [
            {"session_id": self.session_id, "plugin_id": plugin_id, "namespace": namespace, "key": key}
            for (plugin_id, namespace, key), (value, _text) in entries.items()
            if value is MISSING
        ]
        if values:
            self.connection.execute(_upsert_statement(self.connection.dialect.name), values)
        if gone:
            self.connection.execute(_DELETE_STATEMENT, gone)


# A delete, buffered: the entry reads as missing from then on.
_DELETE: Encoded = (MISSING, "")
# Built once: building the statement costs more than running it.
_CURRENT_VALUES = select(_TABLE.c.plugin_id, _TABLE.c.namespace, _TABLE.c.key, _TABLE.c.value).where(
    _TABLE.c.session_id == bindparam("session_id"),
    tuple_(_TABLE.c.plugin_id, _TABLE.c.namespace, _TABLE.c.key).in_(bindparam("addresses", expanding=True)),
)
_DELETE_STATEMENT = sql_delete(_TABLE).where(
    _TABLE.c.session_id == bindparam("session_id"),
    _TABLE.c.plugin_id == bindparam("plugin_id"),
    _TABLE.c.namespace == bindparam("namespace"),
    _TABLE.c.key == bindparam("key"),
)
