"""Unit tests for the pure retry schedule."""

from __future__ import annotations

import math

import pytest
from dex.dexpb import dex_pb2
from hypothesis import given
from hypothesis import strategies as st

from dex_local_engine._rules.retry import (
    DEFAULT_TOTAL_DURATION_SECONDS,
    EffectiveRetryPolicy,
    effective_retry_policy,
    next_retry_delay,
    retry_deadline,
    retry_expired,
)

T0 = 1_000_000.0


def delay(
    policy: dex_pb2.RetryPolicy | None,
    attempt: int,
    *,
    elapsed: float = 0.0,
    retry_after: float | None = None,
) -> float | None:
    return next_retry_delay(
        policy,
        attempt=attempt,
        first_attempt_at=T0,
        now=T0 + elapsed,
        retry_after_seconds=retry_after,
    )


def test_defaults() -> None:
    assert effective_retry_policy(None) == EffectiveRetryPolicy(1.0, 2.0, 100.0, 0, 14400.0)
    assert effective_retry_policy(dex_pb2.RetryPolicy()) == effective_retry_policy(None)


def test_default_schedule_doubles_then_caps_at_100_seconds() -> None:
    assert [delay(None, n) for n in range(1, 10)] == [1, 2, 4, 8, 16, 32, 64, 100, 100]


def test_custom_schedule() -> None:
    policy = dex_pb2.RetryPolicy(
        initial_interval_seconds=3, backoff_coefficient=1.5, maximum_interval_seconds=10
    )
    assert [delay(policy, n) for n in range(1, 6)] == [3, 4.5, 6.75, 10, 10]


def test_coefficient_one_keeps_the_interval() -> None:
    policy = dex_pb2.RetryPolicy(initial_interval_seconds=2, backoff_coefficient=1)
    assert delay(policy, 1) == 2
    assert delay(policy, 10_000) == 2


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert delay(None, 10_000_000) == 100


def test_maximum_attempts_counts_the_first_call() -> None:
    policy = dex_pb2.RetryPolicy(maximum_attempts=3)
    assert delay(policy, 1) == 1
    assert delay(policy, 2) == 2
    assert delay(policy, 3) is None
    assert delay(policy, 4) is None
    assert delay(dex_pb2.RetryPolicy(maximum_attempts=1), 1) is None


def test_zero_maximum_attempts_is_unlimited() -> None:
    assert delay(dex_pb2.RetryPolicy(maximum_attempts=0), 500) == 100


def test_total_duration_runs_from_the_first_attempt() -> None:
    policy = dex_pb2.RetryPolicy(total_duration_seconds=10)
    assert delay(policy, 1, elapsed=0) == 1
    assert delay(policy, 3, elapsed=5) == 4  # retry at 9 s < 10 s
    assert delay(policy, 3, elapsed=6) is None  # retry at 10 s is too late
    assert delay(policy, 1, elapsed=11) is None


def test_default_total_duration_is_four_hours() -> None:
    assert delay(None, 50, elapsed=DEFAULT_TOTAL_DURATION_SECONDS - 101) == 100
    assert delay(None, 50, elapsed=DEFAULT_TOTAL_DURATION_SECONDS - 100) is None


def test_retry_after_overrides_the_interval() -> None:
    assert delay(None, 1, retry_after=7) == 7
    assert delay(None, 8, retry_after=3) == 3
    # Not capped by the maximum interval.
    assert delay(dex_pb2.RetryPolicy(maximum_interval_seconds=5), 1, retry_after=60) == 60
    # Zero means no hint.
    assert delay(None, 3, retry_after=0) == 4


def test_retry_after_still_respects_limits() -> None:
    assert delay(dex_pb2.RetryPolicy(maximum_attempts=2), 2, retry_after=1) is None
    policy = dex_pb2.RetryPolicy(total_duration_seconds=10)
    assert delay(policy, 1, elapsed=2, retry_after=8) is None
    assert delay(policy, 1, elapsed=2, retry_after=7.5) == 7.5


def test_large_initial_interval_with_default_maximum() -> None:
    policy = dex_pb2.RetryPolicy(initial_interval_seconds=300)
    assert delay(policy, 1) == 300
    assert delay(policy, 2) == 300


def test_expiration_helpers() -> None:
    policy = dex_pb2.RetryPolicy(total_duration_seconds=60)
    assert retry_deadline(policy, first_attempt_at=T0) == T0 + 60
    assert retry_deadline(None, first_attempt_at=T0) == T0 + 14400
    assert not retry_expired(policy, first_attempt_at=T0, now=T0 + 59.9)
    assert retry_expired(policy, first_attempt_at=T0, now=T0 + 60)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (dex_pb2.RetryPolicy(initial_interval_seconds=-1), "initial_interval_seconds"),
        (dex_pb2.RetryPolicy(maximum_interval_seconds=-1), "maximum_interval_seconds"),
        (dex_pb2.RetryPolicy(maximum_attempts=-1), "maximum_attempts"),
        (dex_pb2.RetryPolicy(total_duration_seconds=-1), "total_duration_seconds"),
        (dex_pb2.RetryPolicy(backoff_coefficient=0.5), "backoff_coefficient"),
        (dex_pb2.RetryPolicy(backoff_coefficient=-2), "backoff_coefficient"),
        (dex_pb2.RetryPolicy(backoff_coefficient=math.nan), "backoff_coefficient"),
        (
            dex_pb2.RetryPolicy(initial_interval_seconds=10, maximum_interval_seconds=5),
            "must not be less",
        ),
    ],
)
def test_invalid_policies_are_rejected(policy: dex_pb2.RetryPolicy, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        delay(policy, 1)


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        delay(None, 0)
    with pytest.raises(ValueError, match="retry_after_seconds"):
        delay(None, 1, retry_after=-1)


@given(
    initial=st.integers(0, 50),
    coefficient=st.sampled_from([0.0, 1.0, 1.5, 2.0, 3.0]),
    maximum=st.integers(0, 500),
    attempt=st.integers(1, 60),
)
def test_delays_never_shrink_and_stay_in_bounds(
    initial: int, coefficient: float, maximum: int, attempt: int
) -> None:
    policy = dex_pb2.RetryPolicy(
        initial_interval_seconds=initial,
        backoff_coefficient=coefficient,
        maximum_interval_seconds=max(maximum, initial) if maximum else 0,
    )
    effective = effective_retry_policy(policy)
    current = delay(policy, attempt)
    following = delay(policy, attempt + 1)
    assert current is not None
    assert following is not None
    assert effective.initial_interval_seconds <= current <= effective.maximum_interval_seconds
    assert following >= current
