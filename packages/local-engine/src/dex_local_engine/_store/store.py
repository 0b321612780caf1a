"""SQLite persistence: WAL mode, one short transaction per engine state transition.

``synchronous=NORMAL`` in WAL mode makes every committed transaction survive a crash
of the engine process (the operating system still holds the written pages); only a
power loss or kernel crash can drop the last transactions.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass

from dex_local_engine._rules.durability import DEFAULT_DURABILITY, Durability

SCHEMA = """
CREATE TABLE IF NOT EXISTS flows (
    flow_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    flow_type TEXT NOT NULL,
    status INTEGER NOT NULL,
    meta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS attributes (
    flow_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (flow_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS channel_msgs (
    flow_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    channel TEXT NOT NULL,
    message_id TEXT NOT NULL,
    value BLOB NOT NULL,
    consumer TEXT,
    PRIMARY KEY (flow_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS steps (
    flow_id TEXT NOT NULL,
    sid TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (flow_id, sid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    flow_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    event BLOB NOT NULL,
    PRIMARY KEY (flow_id, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_msgs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    flow_type TEXT NOT NULL,
    stream TEXT NOT NULL,
    flow_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    value BLOB NOT NULL,
    created REAL NOT NULL,
    source TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_msgs_by_flow ON stream_msgs (flow_type, stream, flow_id, seq);
CREATE TABLE IF NOT EXISTS attribute_indexes (
    attribute_key TEXT PRIMARY KEY,
    config BLOB NOT NULL
) WITHOUT ROWID;
"""


class DatabaseError(RuntimeError):
    """The database file cannot be opened or is not an engine database."""


@dataclass(frozen=True)
class FlowRow:
    """One row of the flows table."""

    flow_id: str
    run_id: str
    flow_type: str
    status: int
    meta: str


@dataclass(frozen=True)
class StreamRow:
    """One row of the stream messages table."""

    row_id: int
    flow_type: str
    stream: str
    flow_id: str
    seq: int
    value: bytes
    created: float
    source: str
    size: int


class Store:
    """The engine's SQLite database. Used only from the engine's event loop thread."""

    def __init__(
        self,
        database: str | os.PathLike[str],
        durability: Durability = DEFAULT_DURABILITY,
    ) -> None:
        path = os.fspath(database)
        self.path = path
        self.durability = durability
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={durability.sqlite_synchronous}")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(SCHEMA)
        except sqlite3.Error as error:
            raise DatabaseError(f"cannot use database {path!r}: {error}") from error
        self._depth = 0

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    @contextmanager
    def transaction(self) -> Generator[None]:
        """One atomic transaction; nested uses join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._db.execute("ROLLBACK")
            raise
        self._depth = 0
        self._db.execute("COMMIT")

    # Flows ------------------------------------------------------------------------

    def put_flow(self, flow_id: str, run_id: str, flow_type: str, status: int, meta: str) -> None:
        """Insert or replace a Flow's row."""
        self._db.execute(
            "INSERT OR REPLACE INTO flows VALUES (?, ?, ?, ?, ?)",
            (flow_id, run_id, flow_type, status, meta),
        )

    def delete_flow_data(self, flow_id: str) -> None:
        """Forget the previous run's Attributes, messages, Steps and history."""
        for table in ("attributes", "channel_msgs", "steps", "history"):
            self._db.execute(f"DELETE FROM {table} WHERE flow_id = ?", (flow_id,))

    def delete_history(self, flow_id: str) -> None:
        """Forget a Flow's history (it continued as new)."""
        self._db.execute("DELETE FROM history WHERE flow_id = ?", (flow_id,))

    def flows(self) -> list[FlowRow]:
        """Every Flow row."""
        rows = self._db.execute("SELECT flow_id, run_id, flow_type, status, meta FROM flows")
        return [FlowRow(*row) for row in rows]

    # Attribute indexes ------------------------------------------------------------

    def put_attribute_index(self, attribute_key: str, config: bytes) -> None:
        """Store one Attribute's index configuration (a serialized IndexConfig)."""
        self._db.execute(
            "INSERT OR REPLACE INTO attribute_indexes VALUES (?, ?)", (attribute_key, config)
        )

    def attribute_indexes(self) -> list[tuple[str, bytes]]:
        """Every stored Attribute index configuration."""
        rows = self._db.execute("SELECT attribute_key, config FROM attribute_indexes")
        return [(key, config) for key, config in rows]

    # Attributes -------------------------------------------------------------------

    def put_attribute(self, flow_id: str, key: str, value: bytes | None) -> None:
        """Write an Attribute (None deletes it)."""
        if value is None:
            self._db.execute("DELETE FROM attributes WHERE flow_id = ? AND key = ?", (flow_id, key))
        else:
            self._db.execute(
                "INSERT OR REPLACE INTO attributes VALUES (?, ?, ?)", (flow_id, key, value)
            )

    def attributes(self, flow_id: str) -> list[tuple[str, bytes]]:
        """A Flow's Attributes as serialized Values."""
        rows = self._db.execute("SELECT key, value FROM attributes WHERE flow_id = ?", (flow_id,))
        return [(key, value) for key, value in rows]

    # Channel messages -------------------------------------------------------------

    def add_message(
        self, flow_id: str, seq: int, channel: str, message_id: str, value: bytes
    ) -> None:
        """Append a Channel message."""
        self._db.execute(
            "INSERT INTO channel_msgs VALUES (?, ?, ?, ?, ?, NULL)",
            (flow_id, seq, channel, message_id, value),
        )

    def consume_message(self, flow_id: str, seq: int, consumer: str) -> None:
        """Hold a message for the Step execution that took it."""
        self._db.execute(
            "UPDATE channel_msgs SET consumer = ? WHERE flow_id = ? AND seq = ?",
            (consumer, flow_id, seq),
        )

    def delete_message(self, flow_id: str, seq: int) -> None:
        """Delete a Channel message."""
        self._db.execute("DELETE FROM channel_msgs WHERE flow_id = ? AND seq = ?", (flow_id, seq))

    def messages(self, flow_id: str) -> list[tuple[int, str, str, bytes, str | None]]:
        """A Flow's Channel messages in order, with their consumer."""
        rows = self._db.execute(
            "SELECT seq, channel, message_id, value, consumer FROM channel_msgs "
            "WHERE flow_id = ? ORDER BY seq",
            (flow_id,),
        )
        return [(seq, ch, mid, value, consumer) for seq, ch, mid, value, consumer in rows]

    # Steps ------------------------------------------------------------------------

    def put_step(self, flow_id: str, sid: str, data: str) -> None:
        """Insert or replace a Step execution's row."""
        self._db.execute("INSERT OR REPLACE INTO steps VALUES (?, ?, ?)", (flow_id, sid, data))

    def steps(self, flow_id: str) -> list[str]:
        """A Flow's Step execution rows."""
        rows = self._db.execute("SELECT data FROM steps WHERE flow_id = ?", (flow_id,))
        return [data for (data,) in rows]

    # History ----------------------------------------------------------------------

    def add_event(self, flow_id: str, event_id: int, event: bytes) -> None:
        """Append a history event."""
        self._db.execute("INSERT INTO history VALUES (?, ?, ?)", (flow_id, event_id, event))

    def last_event_id(self, flow_id: str) -> int:
        """The highest history event ID of a Flow (0 without events)."""
        row = self._db.execute(
            "SELECT MAX(event_id) FROM history WHERE flow_id = ?", (flow_id,)
        ).fetchone()
        return int(row[0] or 0)

    def events(self, flow_id: str, start_event_id: int, limit: int) -> list[bytes]:
        """Serialized history events from an ID on, at most ``limit``."""
        rows = self._db.execute(
            "SELECT event FROM history WHERE flow_id = ? AND event_id >= ? "
            "ORDER BY event_id LIMIT ?",
            (flow_id, start_event_id, limit),
        )
        return [event for (event,) in rows]

    # Streams ----------------------------------------------------------------------

    def add_stream_message(
        self,
        flow_type: str,
        stream: str,
        flow_id: str,
        seq: int,
        value: bytes,
        created: float,
        source: str,
    ) -> int:
        """Append a Stream message; returns its row ID."""
        cursor = self._db.execute(
            "INSERT INTO stream_msgs "
            "(flow_type, stream, flow_id, seq, value, created, source, size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (flow_type, stream, flow_id, seq, value, created, source, len(value)),
        )
        return int(cursor.lastrowid or 0)

    def delete_stream_messages(self, row_ids: list[int]) -> None:
        """Delete Stream messages by row ID."""
        self._db.executemany("DELETE FROM stream_msgs WHERE id = ?", [(i,) for i in row_ids])

    def stream_messages(self) -> list[StreamRow]:
        """Every retained Stream message."""
        rows = self._db.execute(
            "SELECT id, flow_type, stream, flow_id, seq, value, created, source, size "
            "FROM stream_msgs ORDER BY id"
        )
        return [StreamRow(*row) for row in rows]
