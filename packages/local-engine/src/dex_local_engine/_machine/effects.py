"""Attribute writes, Channel publications and deletions of a Step or RPC result."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import grpc
from dex.dexpb import dex_pb2 as pb

from dex_local_engine._machine import indexes
from dex_local_engine._machine.state import EngineState
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.model import ChannelMsg, Flow
from dex_local_engine._rules.values import is_null, null, uuid7


def apply_attribute_writes(
    engine: EngineState, flow: Flow, writes: Iterable[pb.AttributeWrite]
) -> None:
    """Write Attributes (a null or missing value deletes the key), and queue the synced ones
    for the Flow's Attribute Stores."""
    for write in writes:
        if not write.key:
            continue
        if write.HasField("index_config"):
            indexes.note_write(engine, write)
        deleted = not write.HasField("value") or is_null(write.value)
        if deleted:
            if flow.attributes.pop(write.key, None) is not None:
                engine.store.put_attribute(flow.flow_id, write.key, None)
        else:
            flow.attributes[write.key] = write.value
            engine.store.put_attribute(flow.flow_id, write.key, write.value.SerializeToString())
        if write.sync_config.enabled:
            # A deletion projects SQL NULL, as on Dex Server.
            for store in flow.config.attribute_store_names.names:
                engine.project(store, flow, write.key, null() if deleted else write.value)
    engine.mark_changed(flow.flow_id)


def _find_message(flow: Flow, channel: str, message_id: str) -> ChannelMsg | None:
    queue = flow.channels.get(channel)
    if not queue:
        return None
    return next((m for m in queue if m.message_id == message_id), None)


def apply_effects(
    engine: EngineState,
    flow: Flow,
    writes: list[pb.AttributeWrite],
    publications: list[pb.ChannelMessage],
    deletions: list[pb.ChannelMessageDeletion],
    *,
    strict: bool,
) -> None:
    """Apply a result's Attribute writes, Channel deletions and publications.

    With ``strict`` (transactional or locking RPCs) a deletion of a message that is not
    there fails the whole result before anything changes."""
    if strict:
        for deletion in deletions:
            if _find_message(flow, deletion.channel_name, deletion.message_id) is None:
                raise DexError(
                    grpc.StatusCode.NOT_FOUND,
                    pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
                    f"message {deletion.message_id!r} is not in Channel {deletion.channel_name!r}",
                )
    apply_attribute_writes(engine, flow, writes)
    for deletion in deletions:
        message = _find_message(flow, deletion.channel_name, deletion.message_id)
        if message is not None:
            flow.channels[deletion.channel_name].remove(message)
            engine.store.delete_message(flow.flow_id, message.seq)
    for publication in publications:
        if not publication.channel_name:
            continue
        value = publication.value if publication.HasField("value") else null()
        message = ChannelMsg(flow.next_seq, publication.channel_name, uuid7(), value)
        flow.next_seq += 1
        flow.channels.setdefault(message.channel, deque()).append(message)
        engine.store.add_message(
            flow.flow_id,
            message.seq,
            message.channel,
            message.message_id,
            value.SerializeToString(),
        )
    engine.mark_changed(flow.flow_id)
