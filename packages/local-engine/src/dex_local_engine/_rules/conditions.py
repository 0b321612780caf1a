"""Pure planner for a Step's waiting condition.

Given the condition a Step's ``wait_for`` returned and a snapshot of what has
happened (which timers fired or were skipped, how many unconsumed messages each
channel holds), :func:`evaluate_wait` answers whether the wait is over and, if
so, exactly which conditions report COMPLETED and how many messages each
winning channel condition takes. It never touches storage: the engine applies
the outcome in the same transaction that read the snapshot.

Semantics (matching the Dex server's planner):

* Channel bounds. Neither ``at_least`` nor ``at_most`` set means exactly one
  message. An omitted ``at_least`` means zero, an omitted ``at_most`` means no
  upper bound. So ``at_most`` alone is satisfied at once (even by an empty
  channel) and takes up to that many messages; ``at_least`` alone waits for that
  many and then takes every available message.
* Candidates. ALL is one candidate holding every condition. ANY has one
  candidate per condition: every timer in declaration order, then every channel
  condition in declaration order. ANY_COMBINATION has one candidate per
  combination, in declaration order. The first satisfied candidate wins, and
  only its channel conditions consume messages.
* Several channel conditions of one candidate on the same channel share its
  messages in two passes, both in channel-condition declaration order: first
  each reserves its minimum (the candidate fails if the minimums do not fit),
  then each takes extra messages up to its maximum from what is left. Messages
  are handed out FIFO in that same order.
* Results. Every timer that fired or was skipped reports COMPLETED, whether or
  not it belongs to the winning candidate. A channel condition reports
  COMPLETED exactly when it belongs to the winning candidate, even when it takes
  zero messages.
* SubFlow conditions are one-shot like timers: satisfied once the child Flow is
  closed (whatever its status). ANY puts them after timers and channels.
* A condition with no timers, channels or SubFlows is satisfied immediately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dex.dexpb import dex_pb2

__all__ = [
    "ChannelBounds",
    "InvalidWaitingConditionError",
    "UnsupportedWaitingConditionError",
    "WaitOutcome",
    "WaitState",
    "channel_bounds",
    "evaluate_wait",
    "validate_waiting_condition",
]


class InvalidWaitingConditionError(ValueError):
    """The waiting condition is malformed; the Dex server rejects it too."""


class UnsupportedWaitingConditionError(ValueError):
    """The waiting condition is valid for Dex but uses a feature this engine lacks."""


@dataclass(frozen=True)
class WaitState:
    """What has happened since the Step started waiting."""

    fired_timers: frozenset[int]
    """Indexes into ``condition.timer_conditions`` that fired or were skipped."""
    channel_sizes: Mapping[str, int]
    """Unconsumed messages available per physical channel name (missing = 0)."""
    closed_sub_flows: frozenset[int] = frozenset()
    """Indexes into ``condition.sub_flow_conditions`` whose child Flow is closed."""


@dataclass(frozen=True)
class WaitOutcome:
    """A satisfied wait: what reports COMPLETED and what gets consumed."""

    completed_timers: tuple[int, ...]
    """Timer indexes reported COMPLETED, ascending."""
    channel_takes: tuple[tuple[int, int], ...]
    """``(channel condition index, messages taken)`` for every COMPLETED channel
    condition, ascending by index. Apply them in this order, each taking the
    next messages of its channel FIFO."""


@dataclass(frozen=True)
class ChannelBounds:
    """Normalized consumption bounds of one channel condition."""

    minimum: int
    maximum: int | None
    """``None`` means unbounded."""


_ALL = dex_pb2.WAITING_CONDITION_TYPE_ALL_COMPLETED
_ANY = dex_pb2.WAITING_CONDITION_TYPE_ANY_COMPLETED
_ANY_COMBINATION = dex_pb2.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED


def channel_bounds(condition: dex_pb2.ChannelCondition) -> ChannelBounds:
    """Apply the omitted-bound rules to one channel condition."""
    has_at_least = condition.HasField("at_least")
    has_at_most = condition.HasField("at_most")
    if not has_at_least and not has_at_most:
        return ChannelBounds(minimum=1, maximum=1)
    minimum = condition.at_least if has_at_least else 0
    maximum = condition.at_most if has_at_most else None
    return ChannelBounds(minimum=minimum, maximum=maximum)


def validate_waiting_condition(condition: dex_pb2.WaitingCondition) -> None:
    """Raise :class:`InvalidWaitingConditionError` for conditions Dex rejects."""
    kind = condition.waiting_condition_type
    if kind not in (_ALL, _ANY, _ANY_COMBINATION):
        raise InvalidWaitingConditionError(f"unknown waiting_condition_type {kind}")
    ids_required = kind == _ANY_COMBINATION
    declared: set[str] = set()

    def declare(condition_id: str, kind_name: str) -> None:
        if not condition_id:
            if ids_required:
                raise InvalidWaitingConditionError(
                    f"{kind_name} condition has an empty condition_id, "
                    "which ANY_COMBINATION does not allow"
                )
            return
        if condition_id in declared:
            raise InvalidWaitingConditionError(f"duplicate condition_id {condition_id!r}")
        declared.add(condition_id)

    for timer in condition.timer_conditions:
        declare(timer.condition_id, "timer")
        if timer.duration_seconds < 0:
            raise InvalidWaitingConditionError(
                f"timer condition {timer.condition_id!r} has negative "
                f"duration_seconds {timer.duration_seconds}"
            )
        if timer.firing_unix_timestamp_seconds != 0:
            raise InvalidWaitingConditionError(
                f"timer condition {timer.condition_id!r} sets "
                "firing_unix_timestamp_seconds, which only the server may set"
            )
    for channel in condition.channel_conditions:
        declare(channel.condition_id, "channel")
        label = channel.condition_id or channel.channel_name
        if not channel.channel_name:
            raise InvalidWaitingConditionError(
                f"channel condition {channel.condition_id!r} has an empty channel_name"
            )
        if channel.HasField("at_least") and channel.at_least < 0:
            raise InvalidWaitingConditionError(
                f"channel condition {label!r} has negative at_least {channel.at_least}"
            )
        if channel.HasField("at_most") and channel.at_most < 0:
            raise InvalidWaitingConditionError(
                f"channel condition {label!r} has negative at_most {channel.at_most}"
            )
        if channel.HasField("at_most") and channel.at_most < channel.at_least:
            raise InvalidWaitingConditionError(
                f"channel condition {label!r} has at_most {channel.at_most} "
                f"< at_least {channel.at_least}"
            )
    for sub_flow in condition.sub_flow_conditions:
        declare(sub_flow.condition_id, "SubFlow")
        if not sub_flow.sub_flow_type:
            raise InvalidWaitingConditionError(
                f"SubFlow condition {sub_flow.condition_id!r} has an empty sub_flow_type"
            )

    if kind != _ANY_COMBINATION:
        if len(condition.condition_combinations) > 0:
            raise InvalidWaitingConditionError(
                "condition_combinations are only valid for ANY_COMBINATION_COMPLETED"
            )
        return
    if len(condition.condition_combinations) == 0:
        raise InvalidWaitingConditionError(
            "ANY_COMBINATION_COMPLETED requires at least one condition combination"
        )
    for position, combination in enumerate(condition.condition_combinations):
        if len(combination.condition_ids) == 0:
            raise InvalidWaitingConditionError(f"condition combination {position} is empty")
        seen: set[str] = set()
        for condition_id in combination.condition_ids:
            if condition_id not in declared:
                raise InvalidWaitingConditionError(
                    f"condition combination {position} names undeclared "
                    f"condition_id {condition_id!r}"
                )
            if condition_id in seen:
                raise InvalidWaitingConditionError(
                    f"condition combination {position} repeats condition_id {condition_id!r}"
                )
            seen.add(condition_id)


@dataclass(frozen=True)
class _Candidate:
    """A set of conditions that must all be satisfied together."""

    timers: tuple[int, ...]
    channels: tuple[int, ...]
    """Channel condition indexes, ascending (allocation order)."""
    sub_flows: tuple[int, ...] = ()


def _candidates(condition: dex_pb2.WaitingCondition) -> list[_Candidate]:
    timer_count = len(condition.timer_conditions)
    channel_count = len(condition.channel_conditions)
    sub_flow_count = len(condition.sub_flow_conditions)
    kind = condition.waiting_condition_type
    if kind == _ALL:
        return [
            _Candidate(
                tuple(range(timer_count)), tuple(range(channel_count)), tuple(range(sub_flow_count))
            )
        ]
    if kind == _ANY:
        return (
            [_Candidate((index,), ()) for index in range(timer_count)]
            + [_Candidate((), (index,)) for index in range(channel_count)]
            + [_Candidate((), (), (index,)) for index in range(sub_flow_count)]
        )
    timer_by_id = {
        timer.condition_id: index for index, timer in enumerate(condition.timer_conditions)
    }
    channel_by_id = {
        channel.condition_id: index for index, channel in enumerate(condition.channel_conditions)
    }
    sub_flow_by_id = {
        sub_flow.condition_id: index for index, sub_flow in enumerate(condition.sub_flow_conditions)
    }
    candidates: list[_Candidate] = []
    for combination in condition.condition_combinations:
        ids: Sequence[str] = combination.condition_ids
        timers = tuple(timer_by_id[cid] for cid in ids if cid in timer_by_id)
        channels = tuple(sorted(channel_by_id[cid] for cid in ids if cid in channel_by_id))
        sub_flows = tuple(sub_flow_by_id[cid] for cid in ids if cid in sub_flow_by_id)
        candidates.append(_Candidate(timers, channels, sub_flows))
    return candidates


def _plan_channels(
    candidate: _Candidate,
    bounds: Sequence[ChannelBounds],
    names: Sequence[str],
    sizes: Mapping[str, int],
) -> tuple[tuple[int, int], ...] | None:
    """Two-pass reservation; ``None`` when the minimums do not fit."""
    remaining: dict[str, int] = {}
    takes: dict[int, int] = {}
    for index in candidate.channels:
        name = names[index]
        left = remaining.get(name, sizes.get(name, 0))
        if left < bounds[index].minimum:
            return None
        remaining[name] = left - bounds[index].minimum
        takes[index] = bounds[index].minimum
    for index in candidate.channels:
        name = names[index]
        left = remaining[name]
        maximum = bounds[index].maximum
        extra = left if maximum is None else min(left, maximum - bounds[index].minimum)
        takes[index] += extra
        remaining[name] = left - extra
    return tuple((index, takes[index]) for index in candidate.channels)


def _validate_state(condition: dex_pb2.WaitingCondition, state: WaitState) -> None:
    timer_count = len(condition.timer_conditions)
    for index in state.fired_timers:
        if not 0 <= index < timer_count:
            raise ValueError(
                f"fired timer index {index} is outside the condition's {timer_count} timers"
            )
    for name, size in state.channel_sizes.items():
        if size < 0:
            raise ValueError(f"channel {name!r} has a negative size {size}")


def evaluate_wait(condition: dex_pb2.WaitingCondition, state: WaitState) -> WaitOutcome | None:
    """Decide whether the wait is satisfied; ``None`` means keep waiting.

    Raises :class:`InvalidWaitingConditionError` (a ``ValueError``) for a
    malformed condition and ``ValueError`` for an inconsistent state.
    """
    validate_waiting_condition(condition)
    _validate_state(condition, state)
    completed_timers = tuple(sorted(state.fired_timers))
    if (
        len(condition.timer_conditions) == 0
        and len(condition.channel_conditions) == 0
        and len(condition.sub_flow_conditions) == 0
    ):
        return WaitOutcome(completed_timers=completed_timers, channel_takes=())
    bounds = [channel_bounds(channel) for channel in condition.channel_conditions]
    names = [channel.channel_name for channel in condition.channel_conditions]
    for candidate in _candidates(condition):
        if not all(index in state.fired_timers for index in candidate.timers):
            continue
        if not all(index in state.closed_sub_flows for index in candidate.sub_flows):
            continue
        takes = _plan_channels(candidate, bounds, names, state.channel_sizes)
        if takes is not None:
            return WaitOutcome(completed_timers=completed_timers, channel_takes=takes)
    return None
