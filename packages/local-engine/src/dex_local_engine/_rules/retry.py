"""Pure retry schedule for Step methods (``wait_for`` and ``execute``).

Rules, as Dex applies them to a Step method's ``RetryPolicy``:

* Zero (or absent) fields take the defaults: 1 s initial interval, backoff
  coefficient 2, 100 s maximum interval, unlimited attempts, and a total
  duration of four hours (the default the SDK documents for 1.23.0).
* The delay after failed attempt ``n`` is ``initial * coefficient ** (n - 1)``,
  capped at the maximum interval.
* ``maximum_attempts`` counts the first call; once that many attempts have
  failed there is no retry.
* The total duration runs from the first attempt. A retry is scheduled only if
  it would start before that deadline.
* A worker's ``retry_after_seconds`` replaces the computed delay for that one
  retry (it is not capped by the maximum interval); the attempt and duration
  limits still apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from dex.dexpb import dex_pb2

__all__ = [
    "DEFAULT_BACKOFF_COEFFICIENT",
    "DEFAULT_INITIAL_INTERVAL_SECONDS",
    "DEFAULT_MAXIMUM_INTERVAL_SECONDS",
    "DEFAULT_TOTAL_DURATION_SECONDS",
    "EffectiveRetryPolicy",
    "effective_retry_policy",
    "next_retry_delay",
    "retry_deadline",
    "retry_expired",
]

DEFAULT_INITIAL_INTERVAL_SECONDS = 1.0
DEFAULT_BACKOFF_COEFFICIENT = 2.0
DEFAULT_MAXIMUM_INTERVAL_SECONDS = 100.0
DEFAULT_TOTAL_DURATION_SECONDS = 4 * 60 * 60.0


@dataclass(frozen=True)
class EffectiveRetryPolicy:
    """A retry policy with every default applied."""

    initial_interval_seconds: float
    backoff_coefficient: float
    maximum_interval_seconds: float
    maximum_attempts: int
    """0 means unlimited."""
    total_duration_seconds: float


def effective_retry_policy(policy: dex_pb2.RetryPolicy | None) -> EffectiveRetryPolicy:
    """Apply defaults; raise ``ValueError`` for values Dex would reject."""
    if policy is None:
        policy = dex_pb2.RetryPolicy()
    if policy.initial_interval_seconds < 0:
        raise ValueError(
            f"retry policy initial_interval_seconds must not be negative, "
            f"got {policy.initial_interval_seconds}"
        )
    if policy.maximum_interval_seconds < 0:
        raise ValueError(
            f"retry policy maximum_interval_seconds must not be negative, "
            f"got {policy.maximum_interval_seconds}"
        )
    if policy.maximum_attempts < 0:
        raise ValueError(
            f"retry policy maximum_attempts must not be negative, got {policy.maximum_attempts}"
        )
    if policy.total_duration_seconds < 0:
        raise ValueError(
            f"retry policy total_duration_seconds must not be negative, "
            f"got {policy.total_duration_seconds}"
        )
    coefficient = float(policy.backoff_coefficient) or DEFAULT_BACKOFF_COEFFICIENT
    if not coefficient >= 1:  # also rejects NaN
        raise ValueError(
            f"retry policy backoff_coefficient must be at least 1 (or 0 for the default), "
            f"got {policy.backoff_coefficient}"
        )
    initial = float(policy.initial_interval_seconds or DEFAULT_INITIAL_INTERVAL_SECONDS)
    if policy.maximum_interval_seconds:
        maximum = float(policy.maximum_interval_seconds)
        if maximum < initial:
            raise ValueError(
                f"retry policy maximum_interval_seconds ({maximum:g}) must not be less "
                f"than initial_interval_seconds ({initial:g})"
            )
    else:
        # The default cap never undercuts an explicit, larger initial interval.
        maximum = max(DEFAULT_MAXIMUM_INTERVAL_SECONDS, initial)
    return EffectiveRetryPolicy(
        initial_interval_seconds=initial,
        backoff_coefficient=coefficient,
        maximum_interval_seconds=maximum,
        maximum_attempts=policy.maximum_attempts,
        total_duration_seconds=float(
            policy.total_duration_seconds or DEFAULT_TOTAL_DURATION_SECONDS
        ),
    )


def retry_deadline(policy: dex_pb2.RetryPolicy | None, *, first_attempt_at: float) -> float:
    """Time after which no attempt of this method may start (or keep running)."""
    return first_attempt_at + effective_retry_policy(policy).total_duration_seconds


def retry_expired(
    policy: dex_pb2.RetryPolicy | None, *, first_attempt_at: float, now: float
) -> bool:
    """Whether the policy's total duration, counted from the first attempt, has passed."""
    return now >= retry_deadline(policy, first_attempt_at=first_attempt_at)


def _backoff_seconds(effective: EffectiveRetryPolicy, attempt: int) -> float:
    interval = effective.initial_interval_seconds
    if effective.backoff_coefficient == 1:
        return interval
    for _ in range(attempt - 1):
        interval *= effective.backoff_coefficient
        if interval >= effective.maximum_interval_seconds:
            return effective.maximum_interval_seconds
    return min(interval, effective.maximum_interval_seconds)


def next_retry_delay(
    policy: dex_pb2.RetryPolicy | None,
    *,
    attempt: int,
    first_attempt_at: float,
    now: float,
    retry_after_seconds: float | None = None,
) -> float | None:
    """Seconds until the next attempt after failed attempt number `attempt` (1-based), or None when retries are exhausted."""  # noqa: E501
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    if retry_after_seconds is not None and retry_after_seconds < 0:
        raise ValueError(f"retry_after_seconds must not be negative, got {retry_after_seconds}")
    effective = effective_retry_policy(policy)
    if effective.maximum_attempts and attempt >= effective.maximum_attempts:
        return None
    if retry_after_seconds:  # 0 means the worker gave no hint
        delay = float(retry_after_seconds)
    else:
        delay = _backoff_seconds(effective, attempt)
    if now + delay >= first_attempt_at + effective.total_duration_seconds:
        return None
    return delay
