"""Retention: closed Flows older than the period are deleted with all they kept."""

from __future__ import annotations

import argparse
import sqlite3
from datetime import timedelta
from pathlib import Path

import engine_app
import pytest
from conftest import running_flows
from dex import FlowNotFoundError, FlowStatus
from dex.dexpb import dex_pb2 as pb

from dex_local_engine import LocalEngine
from dex_local_engine._machine.engine import Engine
from dex_local_engine._server import retention_check_seconds
from dex_local_engine._store.store import Store
from dex_local_engine.cli import duration, main


def _rows(database: Path, flow_id: str) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        counts = {
            table: db.execute(
                f"SELECT COUNT(*) FROM {table} WHERE flow_id = ?", (flow_id,)
            ).fetchone()[0]
            for table in ("flows", "attributes", "steps", "history", "stream_msgs")
        }
    return counts


def test_purge_deletes_closed_flows_and_keeps_running_ones(tmp_path: Path) -> None:
    database = tmp_path / "engine.db"
    with (
        LocalEngine(str(database)) as engine,
        running_flows(engine_app.flows(), engine.address, str(tmp_path / "cache")) as running,
    ):
        counter = running.flow(engine_app.CounterFlow)
        for flow_id in ("done-1", "done-2", "open-1"):
            running.client.start_flow(counter, flow_id, "total")
            running.client.invoke_rpc(counter.add, flow_id, 2)
        for flow_id in ("done-1", "done-2"):
            running.client.invoke_rpc(counter.finish, flow_id)
            assert running.client.wait_for_flow(flow_id).status is FlowStatus.COMPLETED
        assert _rows(database, "done-1")["history"] > 0

        # Not old enough yet: nothing goes.
        assert engine.purge_closed_flows(timedelta(hours=1)) == 0
        assert running.client.describe_flow("done-1").flow_id == "done-1"

        assert engine.purge_closed_flows(timedelta(0)) == 2
        for flow_id in ("done-1", "done-2"):
            assert set(_rows(database, flow_id).values()) == {0}
            with pytest.raises(FlowNotFoundError):
                running.client.describe_flow(flow_id)
        # The running Flow is untouched and goes on.
        assert running.client.invoke_rpc(counter.add, "open-1", 3) == 5
        # A purged Flow ID starts again as new.
        running.client.start_flow(counter, "done-1", "total")
        assert running.client.invoke_rpc(counter.add, "done-1", 1) == 1


def test_retention_at_start_purges_and_the_file_gives_the_pages_back(tmp_path: Path) -> None:
    database = tmp_path / "engine.db"
    engine = Engine(Store(database))
    big = pb.Value(string_value="x" * 4000)
    for number in range(200):
        flow_id = f"flow-{number}"
        engine.start_flow(
            pb.StartFlowRequest(
                flow_id=flow_id,
                flow_type="T",
                request_id=flow_id,
                flow_start_options=pb.FlowStartOptions(
                    attributes=[pb.AttributeWrite(key=f"k{i}", value=big) for i in range(5)]
                ),
            )
        )
        engine.stop_flow(pb.StopFlowRequest(flow_id=flow_id, stop_type=pb.STOP_TYPE_TERMINATE))
    engine.store.close()
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    full = database.stat().st_size
    assert full > 200 * 5 * 4000

    with LocalEngine(str(database), closed_flow_retention=timedelta(0)) as restarted:
        del restarted
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT COUNT(*) FROM flows").fetchone()[0] == 0
            assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert database.stat().st_size < full / 10


def test_an_older_database_is_compacted_offline_by_the_vacuum_command(tmp_path: Path) -> None:
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as db:  # made without incremental vacuum
        db.execute("CREATE TABLE t (v BLOB)")
        db.executemany("INSERT INTO t VALUES (?)", [(b"x" * 4000,) for _ in range(300)])
        db.execute("DELETE FROM t")
    full = database.stat().st_size
    assert main(["vacuum", "--db", str(database)]) == 0
    assert database.stat().st_size < full / 10
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("15m", 900), ("90s", 90), ("0s", 0), ("7", 7)],
)
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["-1h", "soon", "h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_retention_is_checked_a_tenth_of_the_period_within_bounds() -> None:
    assert retention_check_seconds(timedelta(0)) == 1.0
    assert retention_check_seconds(timedelta(minutes=5)) == 30.0
    assert retention_check_seconds(timedelta(days=30)) == 600.0
