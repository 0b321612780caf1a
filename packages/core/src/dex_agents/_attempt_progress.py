"""Whether the attempts of a failed Step method ever reached a Worker.

An engine may say so in the ``recovery_error`` it hands to a failure-route Step (and
to an execute after a ``wait_for`` that failed under PROCEED): field 3 of
``RecoveryErrorInfo``, a varint, 1 for "not started" and 2 for "not completed". The
local engine sends it; dex-python-sdk 1.23.0 predates the field, keeps it as an
unknown field and forwards it untouched, and an engine that does not send it leaves
the answer ``None``. A failure route that knows its call never reached a Worker
records ``failed`` ("safe to call again") instead of ``outcome_unknown``.

This module decodes the field; reading the Step's protobuf Context, which the SDK
keeps private, is ``dex_agents._sdk_patches.step_context_metadata``.
"""

from __future__ import annotations

from enum import StrEnum

from dex.dexpb import dex_pb2 as pb
from google.protobuf.unknown_fields import UnknownFieldSet

from dex_agents._sdk_patches import step_context_metadata

__all__ = [
    "ATTEMPT_PROGRESS_FIELD",
    "StepAttemptProgress",
    "attempt_progress_of",
    "recovery_attempt_progress",
]

ATTEMPT_PROGRESS_FIELD = 3
"""The field number of the attempt progress in ``RecoveryErrorInfo``."""
_VARINT = 0


class StepAttemptProgress(StrEnum):
    """Whether any attempt of a failed method reached a Worker."""

    NOT_STARTED = "not_started"
    """No attempt reached a Worker: the Step's code never ran."""
    NOT_COMPLETED = "not_completed"
    """At least one attempt reached a Worker, so the code may have run (in part)."""


_BY_NUMBER = {1: StepAttemptProgress.NOT_STARTED, 2: StepAttemptProgress.NOT_COMPLETED}


def attempt_progress_of(info: pb.RecoveryErrorInfo) -> StepAttemptProgress | None:
    """The attempt progress a recovery error carries, or None when the engine did not say."""
    for field in UnknownFieldSet(info):
        if field.field_number == ATTEMPT_PROGRESS_FIELD and field.wire_type == _VARINT:
            return _BY_NUMBER.get(int(field.data))
    return None


def recovery_attempt_progress(context: object) -> StepAttemptProgress | None:
    """The attempt progress of the recovery error in a Step's Context, if it has one.

    ``context`` is the ``dex.Context`` or ``dex.AsyncContext`` a Step method receives.
    """
    metadata = step_context_metadata(context)
    if metadata is None or not metadata.HasField("recovery_error"):
        return None
    return attempt_progress_of(metadata.recovery_error)
