"""Whether the attempts of a failed Step method ever reached a Worker.

The engine adds this to the ``recovery_error`` it hands to a failure-route Step (and
to an execute after a wait_for that failed under PROCEED) as field 3 of
``RecoveryErrorInfo``. dex-python-sdk 1.23.0 predates that field, keeps it as an
unknown field and forwards it untouched, so :func:`recovery_attempt_progress` reads
it from the Step's Context. With a server that does not send it, the answer is None.
"""

from __future__ import annotations

from enum import StrEnum

from dex.dexpb import dex_pb2 as pb
from google.protobuf.unknown_fields import UnknownFieldSet

ATTEMPT_PROGRESS_FIELD = 3
_VARINT = 0


class StepAttemptProgress(StrEnum):
    """Whether any attempt of a failed method reached a Worker."""

    NOT_STARTED = "not_started"
    """No attempt reached a Worker: the Step's code never ran."""
    NOT_COMPLETED = "not_completed"
    """At least one attempt reached a Worker, so the code may have run (in part)."""


_BY_NUMBER = {1: StepAttemptProgress.NOT_STARTED, 2: StepAttemptProgress.NOT_COMPLETED}
NUMBER_OF = {progress: number for number, progress in _BY_NUMBER.items()}


def with_attempt_progress(
    info: pb.RecoveryErrorInfo, progress: StepAttemptProgress
) -> pb.RecoveryErrorInfo:
    """A copy of ``info`` carrying ``progress`` as field 3."""
    marked = pb.RecoveryErrorInfo()
    marked.ParseFromString(
        info.SerializeToString()
        + bytes([ATTEMPT_PROGRESS_FIELD << 3 | _VARINT, NUMBER_OF[progress]])
    )
    return marked


def attempt_progress_of(info: pb.RecoveryErrorInfo) -> StepAttemptProgress | None:
    """The attempt progress a recovery error carries, or None when the server did not say."""
    for field in UnknownFieldSet(info):
        if field.field_number == ATTEMPT_PROGRESS_FIELD and field.wire_type == _VARINT:
            return _BY_NUMBER.get(int(field.data))
    return None


def recovery_attempt_progress(context: object) -> StepAttemptProgress | None:
    """The attempt progress of the recovery error in a Step's Context, if it has one.

    ``context`` is the ``dex.Context`` or ``dex.AsyncContext`` a Step method receives.
    """
    metadata = getattr(context, "_metadata", None)
    if not isinstance(metadata, pb.Context) or not metadata.HasField("recovery_error"):
        return None
    return attempt_progress_of(metadata.recovery_error)
