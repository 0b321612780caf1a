"""Small value helpers: time-ordered IDs, timestamps and null Values."""

from __future__ import annotations

import secrets
import time
import uuid
from typing import cast

from dex.dexpb import dex_pb2 as pb
from google.protobuf import struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp


def uuid7() -> str:
    """A time-ordered UUID (version 7)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + secrets.token_bytes(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def stamp(seconds: float) -> Timestamp:
    """A protobuf Timestamp for seconds since the epoch."""
    result = Timestamp()
    result.FromNanoseconds(int(seconds * 1e9))
    return result


def is_null(value: pb.Value | None) -> bool:
    """Whether a Value is missing or null (a null Attribute write deletes)."""
    return value is None or value.WhichOneof("kind") in (None, "null_value")


def null() -> pb.Value:
    """A null Value."""
    return pb.Value(null_value=cast(struct_pb2.NullValue, struct_pb2.NULL_VALUE))
