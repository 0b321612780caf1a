"""Projecting synced Attribute writes into an Attribute Store's SQLite table.

The engine opens and describes every configured table at start-up (a table that is
missing, or that has no single text primary key, stops the start), then upserts each
Flow's synced writes into the row whose primary key is the Flow ID, after the
transition that made them has committed. As on Dex Server the table belongs to the
application (the engine never creates or migrates it), the projection keeps only the
latest state and cannot undo a committed write, and a write the table cannot take (no
column of the Attribute's name, a value of the wrong type, a null for a required
column, a write to the key) is logged and left out while the other fields go in.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules.attribute_stores import AttributeStore

_LOG = logging.getLogger("dex_local_engine.attribute_store")

SqlValue = str | int | float | bytes | None


class AttributeStoreError(RuntimeError):
    """An Attribute Store's table cannot be used."""


@dataclass(frozen=True)
class _Column:
    name: str
    declared: str  # the declared type, upper case
    required: bool  # NOT NULL without a default

    def accepts(self, value: pb.Value) -> SqlValue | _Refused:
        """The SQL value for ``value`` in this column, or why the column refuses it."""
        kind = value.WhichOneof("kind")
        declared = self.declared
        if kind in (None, "null_value"):
            return _Refused("a null for a required column") if self.required else None
        if kind == "bool_value":
            if "BOOL" in declared:
                return int(value.bool_value)
            return _Refused("a boolean for a non-boolean column")
        if kind == "int_value":
            if _is_numeric(declared) and "BOOL" not in declared:
                return value.int_value
            return _Refused("an integer for a non-numeric column")
        if kind == "double_value":
            if _is_numeric(declared) and "INT" not in declared and "BOOL" not in declared:
                return value.double_value
            return _Refused("a number for a non-floating column")
        if kind == "string_value":
            if _is_text(declared) or _is_time(declared):
                return value.string_value
            return _Refused("a string for a non-text column")
        if kind == "obj_value":
            encoded = value.obj_value
            if "json" in encoded.encoding.lower():
                if "JSON" in declared or _is_text(declared):
                    return encoded.payload.decode()
                return _Refused("a JSON object for a non-JSON column")
            if "BLOB" in declared or "BINARY" in declared or not declared:
                return bytes(encoded.payload)
            return _Refused("an encoded object for a non-binary column")
        return _Refused(f"a {kind} value (blob references are not projected)")


@dataclass(frozen=True)
class _Refused:
    reason: str


def _is_numeric(declared: str) -> bool:
    return any(part in declared for part in ("INT", "REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL"))


def _is_text(declared: str) -> bool:
    return any(part in declared for part in ("CHAR", "CLOB", "TEXT"))


def _is_time(declared: str) -> bool:
    return any(part in declared for part in ("DATE", "TIME"))


class AttributeTable:
    """One Attribute Store's destination table, described once and written to by upserts."""

    def __init__(self, store: AttributeStore) -> None:
        self.store = store
        try:
            self._db = sqlite3.connect(
                store.database, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA busy_timeout=5000")
            schema, _, table = store.table.rpartition(".")
            pragma = f"PRAGMA {_quoted(schema)}.table_info" if schema else "PRAGMA table_info"
            rows = self._db.execute(f"{pragma}({_quoted(table)})").fetchall()
        except sqlite3.Error as error:
            raise AttributeStoreError(
                f"Attribute Store {store.name!r}: cannot use {store.database!r}: {error}"
            ) from error
        if not rows:
            self._db.close()
            raise AttributeStoreError(
                f"Attribute Store {store.name!r}: table {store.table!r} does not exist in "
                f"{store.database!r} (the engine never creates it)"
            )
        keys = [row for row in rows if row[5]]
        if len(keys) != 1 or not _is_text(str(keys[0][2]).upper()):
            self._db.close()
            raise AttributeStoreError(
                f"Attribute Store {store.name!r}: table {store.table!r} needs exactly one "
                "text primary key (it receives the Flow ID)"
            )
        self.key = str(keys[0][1])
        self.columns = {
            str(row[1]): _Column(str(row[1]), str(row[2]).upper(), bool(row[3]) and row[4] is None)
            for row in rows
            if not row[5]
        }

    def upsert(self, flow_id: str, writes: dict[str, pb.Value]) -> None:
        """Write the latest values of a Flow's synced Attributes into its row."""
        names: list[str] = []
        values: list[SqlValue] = []
        for name, value in writes.items():
            column = self.columns.get(name)
            if column is None:
                reason = "the key column" if name == self.key else "no such column"
                _LOG.error(
                    "Attribute Store %s: leaving out Attribute %r of Flow %s: %s",
                    self.store.name,
                    name,
                    flow_id,
                    reason,
                )
                continue
            accepted = column.accepts(value)
            if isinstance(accepted, _Refused):
                _LOG.error(
                    "Attribute Store %s: leaving out Attribute %r of Flow %s: %s",
                    self.store.name,
                    name,
                    flow_id,
                    accepted.reason,
                )
                continue
            names.append(name)
            values.append(accepted)
        if not names:
            return
        columns = ", ".join(_quoted(name) for name in (self.key, *names))
        marks = ", ".join("?" for _ in range(len(names) + 1))
        updates = ", ".join(f"{_quoted(name)} = excluded.{_quoted(name)}" for name in names)
        statement = (
            f"INSERT INTO {_table(self.store.table)} ({columns}) VALUES ({marks}) "
            f"ON CONFLICT({_quoted(self.key)}) DO UPDATE SET {updates}"
        )
        try:
            self._db.execute(statement, [flow_id, *values])
        except sqlite3.Error as error:
            _LOG.error(
                "Attribute Store %s: the write of Flow %s failed: %s",
                self.store.name,
                flow_id,
                error,
            )

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()


def _quoted(identifier: str) -> str:
    """A quoted SQL identifier."""
    return '"' + identifier.replace('"', '""') + '"'


def _table(name: str) -> str:
    """A quoted table name; ``schema.table`` quotes each part."""
    schema, _, table = name.rpartition(".")
    return f"{_quoted(schema)}.{_quoted(table)}" if schema else _quoted(table)
