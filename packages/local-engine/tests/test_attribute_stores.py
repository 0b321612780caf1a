"""Attribute Stores: the engine knows the ones it is configured with, and projects the
synced Attribute writes of the Flows that select one into its SQLite table."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attribute_store_app as app
import pytest
from conftest import RunningFlows, running_flows
from dex import FlowConfig, FlowNotFoundError, StartFlowOptions

from dex_local_engine import AttributeStore, EngineStartError, LocalEngine
from dex_local_engine._rules.attribute_stores import load_config, parse_config

SCHEMA = """
CREATE TABLE user_profiles (
    user_id TEXT PRIMARY KEY,
    display_name TEXT,
    credits BIGINT,
    opted_in BOOLEAN,
    joined TEXT NOT NULL DEFAULT 'today'
)
"""


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    database = tmp_path / "profiles.db"
    with sqlite3.connect(database) as connection:
        connection.execute(SCHEMA)
    return database


@pytest.fixture
def running(profiles: Path, tmp_path: Path, cache_dir: str) -> Iterator[RunningFlows]:
    store = AttributeStore("profiles", profiles, "user_profiles")
    with (
        LocalEngine(tmp_path / "engine.db", attribute_stores=[store]) as engine,
        running_flows(app.flows(), engine.address, cache_dir) as flows,
    ):
        yield flows


def rows(database: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(database) as connection:
        return connection.execute(
            "SELECT user_id, display_name, credits, opted_in, joined FROM user_profiles"
        ).fetchall()


def start(running: RunningFlows, user_id: str, stores: list[str]) -> None:
    flow = running.flow(app.ProfileFlow)
    options = (
        StartFlowOptions(config_override=FlowConfig(attribute_store_names=stores))
        .with_attribute(flow.display_name, "Ada")
        .with_attribute(flow.opted_in, True)
    )
    running.client.start_flow(flow, user_id, 120, options)


def test_synced_writes_of_a_flow_reach_its_row_and_a_deletion_projects_null(
    running: RunningFlows, profiles: Path
) -> None:
    flow = running.flow(app.ProfileFlow)
    start(running, "ada", ["profiles"])
    # The initial Attributes at once; the Step's write commits with its result.
    assert running.client.invoke_rpc(flow.rename, "ada", "Countess") == "Countess"
    assert rows(profiles) == [("ada", "Countess", 120, 1, "today")]
    running.client.invoke_rpc(flow.clear, "ada")
    # The row stays; the cleared columns are NULL, the others keep their values.
    assert rows(profiles) == [("ada", None, 120, None, "today")]


def test_each_flow_has_its_own_row_and_a_flow_without_a_store_projects_nothing(
    running: RunningFlows, profiles: Path
) -> None:
    flow = running.flow(app.ProfileFlow)
    start(running, "ada", ["profiles"])
    start(running, "grace", ["profiles"])
    start(running, "plain", [])
    for user_id in ("ada", "grace", "plain"):
        running.client.invoke_rpc(flow.rename, user_id, user_id.title())
    assert sorted(rows(profiles)) == [
        ("ada", "Ada", 120, 1, "today"),
        ("grace", "Grace", 120, 1, "today"),
    ]


def test_a_store_the_engine_was_not_given_is_unknown(running: RunningFlows) -> None:
    with pytest.raises(Exception, match="unknown Attribute Store 'warehouse'"):
        start(running, "lost", ["profiles", "warehouse"])
    with pytest.raises(FlowNotFoundError):
        running.client.describe_flow("lost")


def test_a_table_the_engine_cannot_use_stops_the_start(tmp_path: Path) -> None:
    database = tmp_path / "other.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE keyed_by_number (id INTEGER PRIMARY KEY, name TEXT)")
    missing = AttributeStore("profiles", database, "user_profiles")
    with pytest.raises(EngineStartError, match="does not exist"):
        LocalEngine(attribute_stores=[missing]).start()
    numbered = AttributeStore("profiles", database, "keyed_by_number")
    with pytest.raises(EngineStartError, match="exactly one text primary key"):
        LocalEngine(attribute_stores=[numbered]).start()


def test_the_configuration_has_dex_servers_shape_and_only_sqlite_stores(tmp_path: Path) -> None:
    document = {
        "attributeStore": {
            "stores": {"entityStore": {"type": "sqlite", "dsn": "a.db", "tableName": "t"}}
        }
    }
    assert parse_config(document) == [AttributeStore("entityStore", "a.db", "t")]
    path = tmp_path / "stores.json"
    path.write_text(json.dumps(document))
    assert load_config(path) == [AttributeStore("entityStore", "a.db", "t")]
    postgres = {
        "attributeStore": {"stores": {"s": {"type": "postgres", "dsn": "x", "tableName": "t"}}}
    }
    with pytest.raises(ValueError, match="SQLite tables only"):
        parse_config(postgres)
    with pytest.raises(ValueError, match="does not define any stores"):
        parse_config({"attributeStore": {"stores": {}}})


def test_serve_takes_the_configuration_file(profiles: Path, tmp_path: Path) -> None:
    config = tmp_path / "stores.json"
    config.write_text(
        json.dumps(
            {
                "attributeStore": {
                    "stores": {
                        "profiles": {
                            "type": "sqlite",
                            "dsn": str(profiles),
                            "tableName": "missing_table",
                        }
                    }
                }
            }
        )
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "dex_local_engine",
            "serve",
            "--port",
            "0",
            "--attribute-store-config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "table 'missing_table' does not exist" in completed.stderr
