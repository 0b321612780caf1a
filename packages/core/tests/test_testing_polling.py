"""poll_until waits on a probe with a deadline; ports are free and distinct."""

import socket
from datetime import timedelta

import pytest

from dex_agents.testing import (
    PollTimeoutError,
    find_free_loopback_ports,
    poll_until,
    poll_until_sync,
)


async def test_poll_until_returns_the_first_value_that_is_not_none_or_false() -> None:
    calls: list[int] = []

    def probe() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) >= 3 else None

    assert await poll_until(probe, description="three calls") == 3


async def test_poll_until_awaits_an_async_probe_and_treats_false_as_not_yet() -> None:
    answers = iter([False, False, True])

    async def probe() -> bool:
        return next(answers)

    assert await poll_until(probe, description="third answer") is True


async def test_poll_until_times_out_naming_what_it_waited_for() -> None:
    with pytest.raises(PollTimeoutError, match=r"waiting for the moon.*last probe result: False"):
        await poll_until(lambda: False, description="the moon", within=timedelta(milliseconds=100))


def test_poll_until_sync_and_bad_durations() -> None:
    values = iter([None, "ready"])
    assert poll_until_sync(lambda: next(values), description="ready") == "ready"
    with pytest.raises(ValueError, match="must be positive"):
        poll_until_sync(lambda: True, description="x", within=timedelta(0))


def test_free_loopback_ports_are_distinct_and_bindable() -> None:
    ports = find_free_loopback_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", port))
    with pytest.raises(ValueError, match="at least 1"):
        find_free_loopback_ports(0)
