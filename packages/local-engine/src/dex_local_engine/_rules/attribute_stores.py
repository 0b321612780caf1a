"""Attribute Stores: the named SQL tables the engine projects synced Attribute writes into.

As on Dex Server, the engine knows its Attribute Stores from its configuration only: a
Flow whose ``FlowConfig`` names a store the engine was not given is refused with
INVALID_ARGUMENT ("unknown Attribute Store"), and an engine started without any knows
none. The configuration has Dex Server's shape::

    attributeStore:
      stores:
        entityStore:
          type: sqlite
          dsn: /var/lib/app/entities.db
          tableName: user_profiles

Dex Server projects into PostgreSQL and MySQL; the local engine projects into SQLite
tables (``type: sqlite``, ``dsn`` the database file) and refuses other types. The file
is JSON, or YAML when PyYAML is installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

SQLITE = "sqlite"
DEX_SERVER_TYPES = ("postgres", "mysql")


@dataclass(frozen=True)
class AttributeStore:
    """One Attribute Store: a name Flows select, and the SQLite table it projects into.

    Attributes:
        name: The name a Flow's ``FlowConfig`` selects (``attribute_store_names``).
        database: The SQLite database file that holds the table.
        table: The destination table. It needs exactly one text primary key, which
            receives the Flow ID; each synced Attribute writes the column of its name.
    """

    name: str
    database: str | os.PathLike[str]
    table: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an Attribute Store needs a name")
        if not os.fspath(self.database) or not self.table:
            raise ValueError(f"Attribute Store {self.name!r} needs a database and a table")


def parse_config(document: Mapping[str, Any]) -> list[AttributeStore]:
    """The stores of a configuration document in Dex Server's shape (see the module)."""
    section = document.get("attributeStore")
    if not isinstance(section, Mapping):
        raise ValueError("the Attribute Store configuration has no 'attributeStore' section")
    stores = cast(Mapping[str, Any], section).get("stores")
    if not isinstance(stores, Mapping) or not stores:
        raise ValueError("the Attribute Store configuration does not define any stores")
    parsed: list[AttributeStore] = []
    for name, entry in cast(Mapping[str, Any], stores).items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"Attribute Store {name!r} must be a mapping")
        fields = cast(Mapping[str, Any], entry)
        kind = str(fields.get("type", ""))
        if kind in DEX_SERVER_TYPES:
            raise ValueError(
                f"Attribute Store {name!r} has type {kind!r}: the local engine projects "
                f"into SQLite tables only (type {SQLITE!r}, dsn the database file)"
            )
        if kind != SQLITE:
            raise ValueError(f"Attribute Store {name!r} has unsupported type {kind!r}")
        dsn, table = fields.get("dsn"), fields.get("tableName")
        if not isinstance(dsn, str) or not dsn or not isinstance(table, str) or not table:
            raise ValueError(f"Attribute Store {name!r} requires dsn and tableName")
        parsed.append(AttributeStore(str(name), dsn, table))
    return parsed


def load_config(path: str | os.PathLike[str]) -> list[AttributeStore]:
    """The stores a configuration file defines (JSON, or YAML with PyYAML installed)."""
    text = Path(path).read_text()
    if Path(path).suffix == ".json":
        document = json.loads(text)
    else:
        try:
            import yaml  # pyright: ignore[reportMissingModuleSource]
        except ImportError:
            raise ValueError(
                f"{os.fspath(path)} is YAML, which needs PyYAML installed; or give the "
                "same configuration as a .json file"
            ) from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ValueError(f"{os.fspath(path)} is not valid YAML: {error}") from None
    if not isinstance(document, Mapping):
        raise ValueError(f"{os.fspath(path)} does not hold a configuration mapping")
    return parse_config(cast(Mapping[str, Any], document))
