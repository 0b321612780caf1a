"""The search indexes of Attributes: declared by Workers, learned from writes, stored.

Workers declare which Attributes are indexed (``SyncAttributeIndexes``, see
``search``); an Attribute indexed under another key is learned from a write that
carries its index configuration. ``search`` answers queries over them.
"""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine.state import EngineState


def note_write(engine: EngineState, write: pb.AttributeWrite) -> None:
    """Learn the index of an Attribute from a write that carries its index config."""
    config = write.index_config
    if not config.enable or not write.key:
        return
    known = engine.indexes.get(write.key)
    if known is None or known.index_key != config.index_key or known.type != config.type:
        remember(engine, write.key, config)


def remember(engine: EngineState, attribute_key: str, config: pb.IndexConfig) -> None:
    """Keep an Attribute's index configuration, in memory and in the store."""
    engine.indexes[attribute_key] = config
    engine.store.put_attribute_index(attribute_key, config.SerializeToString())


def load_indexes(engine: EngineState) -> None:
    """Load the stored index configurations (a restart keeps them)."""
    for attribute_key, data in engine.store.attribute_indexes():
        config = pb.IndexConfig()
        config.ParseFromString(data)
        engine.indexes[attribute_key] = config
