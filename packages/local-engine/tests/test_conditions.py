"""Unit tests for the pure wait-condition planner."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from dex.dexpb import dex_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_local_engine._rules.conditions import (
    ChannelBounds,
    InvalidWaitingConditionError,
    WaitOutcome,
    WaitState,
    channel_bounds,
    evaluate_wait,
    validate_waiting_condition,
)

ALL = dex_pb2.WAITING_CONDITION_TYPE_ALL_COMPLETED
ANY = dex_pb2.WAITING_CONDITION_TYPE_ANY_COMPLETED
COMBO = dex_pb2.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED


def channel(
    name: str, *, at_least: int | None = None, at_most: int | None = None, cid: str = ""
) -> dex_pb2.ChannelCondition:
    condition = dex_pb2.ChannelCondition(condition_id=cid, channel_name=name)
    if at_least is not None:
        condition.at_least = at_least
    if at_most is not None:
        condition.at_most = at_most
    return condition


def timer(seconds: int = 10, *, cid: str = "") -> dex_pb2.TimerCondition:
    return dex_pb2.TimerCondition(condition_id=cid, duration_seconds=seconds)


def waiting(
    kind: int,
    *,
    timers: list[dex_pb2.TimerCondition] | None = None,
    channels: list[dex_pb2.ChannelCondition] | None = None,
    combos: list[list[str]] | None = None,
) -> dex_pb2.WaitingCondition:
    return dex_pb2.WaitingCondition(
        waiting_condition_type=kind,  # type: ignore[arg-type]
        timer_conditions=timers or [],
        channel_conditions=channels or [],
        condition_combinations=[
            dex_pb2.ConditionCombination(condition_ids=ids) for ids in (combos or [])
        ],
    )


def state(fired: set[int] | None = None, **sizes: int) -> WaitState:
    return WaitState(fired_timers=frozenset(fired or set()), channel_sizes=sizes)


def outcome(timers: tuple[int, ...] = (), takes: tuple[tuple[int, int], ...] = ()) -> WaitOutcome:
    return WaitOutcome(completed_timers=timers, channel_takes=takes)


# --- bounds ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("at_least", "at_most", "expected"),
    [
        (None, None, ChannelBounds(1, 1)),
        (None, 3, ChannelBounds(0, 3)),
        (2, None, ChannelBounds(2, None)),
        (0, None, ChannelBounds(0, None)),
        (2, 4, ChannelBounds(2, 4)),
        (None, 0, ChannelBounds(0, 0)),
    ],
)
def test_channel_bounds_apply_omitted_rules(
    at_least: int | None, at_most: int | None, expected: ChannelBounds
) -> None:
    assert channel_bounds(channel("c", at_least=at_least, at_most=at_most)) == expected


@pytest.mark.parametrize(
    ("at_least", "at_most", "available", "expected_take"),
    [
        (None, None, 0, None),  # exactly one: waits
        (None, None, 3, 1),  # exactly one: takes one
        (None, 3, 0, 0),  # at_most alone: an empty channel satisfies
        (None, 3, 2, 2),
        (None, 3, 5, 3),  # capped
        (1, None, 0, None),
        (1, None, 4, 4),  # at_least alone takes everything
        (3, None, 5, 5),
        (0, None, 0, 0),
        (0, None, 4, 4),
        (None, 0, 2, 0),
        (2, 4, 10, 4),
        (2, 4, 3, 3),
        (2, 4, 1, None),
        (2, 2, 2, 2),
    ],
)
def test_single_channel_condition(
    at_least: int | None, at_most: int | None, available: int, expected_take: int | None
) -> None:
    for kind in (ALL, ANY):
        condition = waiting(kind, channels=[channel("ch", at_least=at_least, at_most=at_most)])
        result = evaluate_wait(condition, state(ch=available))
        if expected_take is None:
            assert result is None
        else:
            assert result == outcome(takes=((0, expected_take),))


def test_missing_channel_counts_as_empty() -> None:
    assert evaluate_wait(waiting(ALL, channels=[channel("ch")]), state(other=5)) is None
    assert evaluate_wait(waiting(ALL, channels=[channel("ch", at_most=2)]), state()) == outcome(
        takes=((0, 0),)
    )


# --- ALL ------------------------------------------------------------------


def test_all_needs_every_timer_and_channel() -> None:
    condition = waiting(ALL, timers=[timer(), timer()], channels=[channel("a"), channel("b")])
    assert evaluate_wait(condition, state({0, 1}, a=1)) is None
    assert evaluate_wait(condition, state({0}, a=1, b=1)) is None
    assert evaluate_wait(condition, state({0, 1}, a=2, b=3)) == outcome((0, 1), ((0, 1), (1, 1)))


def test_all_of_only_timers() -> None:
    condition = waiting(ALL, timers=[timer(1), timer(5)])
    assert evaluate_wait(condition, state({1})) is None
    assert evaluate_wait(condition, state({0, 1})) == outcome((0, 1))


def test_all_shared_channel_minimums_must_fit_together() -> None:
    condition = waiting(
        ALL,
        channels=[channel("ch", at_least=2, at_most=2), channel("ch", at_least=2, at_most=2)],
    )
    assert evaluate_wait(condition, state(ch=3)) is None
    assert evaluate_wait(condition, state(ch=4)) == outcome(takes=((0, 2), (1, 2)))
    assert evaluate_wait(condition, state(ch=9)) == outcome(takes=((0, 2), (1, 2)))


def test_all_unbounded_condition_gets_only_leftovers_after_minimums() -> None:
    # The unbounded condition is declared first but must not eat the exact one's minimum.
    condition = waiting(
        ALL, channels=[channel("ch", at_least=0), channel("ch", at_least=2, at_most=2)]
    )
    assert evaluate_wait(condition, state(ch=2)) == outcome(takes=((0, 0), (1, 2)))
    assert evaluate_wait(condition, state(ch=5)) == outcome(takes=((0, 3), (1, 2)))


def test_all_extras_go_in_declaration_order() -> None:
    condition = waiting(
        ALL,
        channels=[channel("ch", at_least=1, at_most=3), channel("ch", at_least=1, at_most=3)],
    )
    assert evaluate_wait(condition, state(ch=2)) == outcome(takes=((0, 1), (1, 1)))
    assert evaluate_wait(condition, state(ch=4)) == outcome(takes=((0, 3), (1, 1)))
    assert evaluate_wait(condition, state(ch=7)) == outcome(takes=((0, 3), (1, 3)))


def test_empty_condition_is_satisfied_immediately() -> None:
    assert evaluate_wait(waiting(ALL), state()) == outcome()
    assert evaluate_wait(waiting(ANY), state()) == outcome()


# --- ANY ------------------------------------------------------------------


def test_any_first_satisfied_channel_wins_and_only_it_consumes() -> None:
    condition = waiting(
        ANY, channels=[channel("a", at_least=5, at_most=5), channel("b"), channel("c")]
    )
    assert evaluate_wait(condition, state(a=1, b=2, c=4)) == outcome(takes=((1, 1),))
    assert evaluate_wait(condition, state(a=1)) is None


def test_any_timers_come_before_channels() -> None:
    # The channel is declared first in code but timers are always tried first.
    condition = waiting(ANY, timers=[timer(5), timer(1)], channels=[channel("a")])
    assert evaluate_wait(condition, state({1}, a=3)) == outcome((1,), ())
    assert evaluate_wait(condition, state(set(), a=3)) == outcome((), ((0, 1),))


def test_any_reports_every_fired_timer() -> None:
    condition = waiting(ANY, timers=[timer(1), timer(2)], channels=[channel("a")])
    assert evaluate_wait(condition, state({0, 1}, a=1)) == outcome((0, 1), ())


def test_any_at_most_alone_completes_at_once() -> None:
    condition = waiting(ANY, timers=[timer()], channels=[channel("a", at_most=4)])
    assert evaluate_wait(condition, state()) == outcome(takes=((0, 0),))


def test_any_two_conditions_on_one_channel_first_wins() -> None:
    condition = waiting(ANY, channels=[channel("a", at_least=3), channel("a", at_most=1)])
    assert evaluate_wait(condition, state(a=2)) == outcome(takes=((1, 1),))
    assert evaluate_wait(condition, state(a=3)) == outcome(takes=((0, 3),))


# --- ANY_COMBINATION -----------------------------------------------------


def doc_example() -> dex_pb2.WaitingCondition:
    return waiting(
        COMBO,
        timers=[timer(30, cid="timeout")],
        channels=[channel("A", cid="signal-a"), channel("B", cid="signal-b")],
        combos=[["signal-a", "timeout"], ["signal-b"]],
    )


def test_combination_needs_every_member() -> None:
    condition = doc_example()
    assert evaluate_wait(condition, state(A=1)) is None
    assert evaluate_wait(condition, state({0})) is None
    assert evaluate_wait(condition, state({0}, A=1)) == outcome((0,), ((0, 1),))


def test_combination_first_satisfied_combination_wins() -> None:
    condition = doc_example()
    assert evaluate_wait(condition, state({0}, A=1, B=1)) == outcome((0,), ((0, 1),))
    # Only the second combination holds; the fired timer still reports COMPLETED
    # while channel A, outside the winner, does not.
    assert evaluate_wait(condition, state({0}, B=2)) == outcome((0,), ((1, 1),))
    assert evaluate_wait(condition, state(A=1, B=1)) == outcome((), ((1, 1),))


def test_combination_allocates_channels_in_declaration_order() -> None:
    condition = waiting(
        COMBO,
        channels=[
            channel("ch", at_least=1, at_most=2, cid="first"),
            channel("ch", at_least=1, at_most=2, cid="second"),
        ],
        combos=[["second", "first"]],
    )
    assert evaluate_wait(condition, state(ch=3)) == outcome(takes=((0, 2), (1, 1)))


def test_combination_conditions_may_repeat_across_combinations() -> None:
    condition = waiting(
        COMBO,
        timers=[timer(cid="t")],
        channels=[channel("a", cid="a"), channel("b", cid="b")],
        combos=[["a", "b"], ["a", "t"]],
    )
    assert evaluate_wait(condition, state(a=1)) is None
    assert evaluate_wait(condition, state({0}, a=1)) == outcome((0,), ((0, 1),))
    assert evaluate_wait(condition, state({0}, a=1, b=1)) == outcome((0,), ((0, 1), (1, 1)))


def test_combination_shared_channel_minimums() -> None:
    condition = waiting(
        COMBO,
        channels=[
            channel("ch", cid="x"),
            channel("ch", cid="y"),
            channel("ch", at_least=3, cid="z"),
        ],
        combos=[["x", "z"], ["x", "y"]],
    )
    # x+z need 4; x+y need 2.
    assert evaluate_wait(condition, state(ch=3)) == outcome(takes=((0, 1), (1, 1)))
    assert evaluate_wait(condition, state(ch=6)) == outcome(takes=((0, 1), (2, 5)))


# --- validation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        (waiting(dex_pb2.WAITING_CONDITION_TYPE_UNSPECIFIED), "unknown waiting_condition_type"),
        (waiting(ANY, timers=[timer(cid="x"), timer(cid="x")]), "duplicate condition_id"),
        (waiting(ANY, timers=[timer(cid="x")], channels=[channel("a", cid="x")]), "duplicate"),
        (waiting(ANY, timers=[timer(-1)]), "negative duration_seconds"),
        (waiting(ANY, channels=[channel("")]), "empty channel_name"),
        (waiting(ANY, channels=[channel("a", at_least=-1)]), "negative at_least"),
        (waiting(ANY, channels=[channel("a", at_most=-1)]), "negative at_most"),
        (waiting(ANY, channels=[channel("a", at_least=3, at_most=2)]), "at_most 2 < at_least 3"),
        (waiting(ALL, channels=[channel("a", cid="a")], combos=[["a"]]), "only valid for"),
        (waiting(COMBO, channels=[channel("a", cid="a")]), "at least one condition combination"),
        (waiting(COMBO, channels=[channel("a", cid="a")], combos=[[]]), "is empty"),
        (waiting(COMBO, channels=[channel("a", cid="a")], combos=[["b"]]), "undeclared"),
        (waiting(COMBO, channels=[channel("a", cid="a")], combos=[["a", "a"]]), "repeats"),
        (waiting(COMBO, channels=[channel("a")], combos=[["a"]]), "empty condition_id"),
        (waiting(COMBO, timers=[timer()], combos=[["a"]]), "empty condition_id"),
    ],
)
def test_malformed_conditions_are_rejected(
    condition: dex_pb2.WaitingCondition, message: str
) -> None:
    with pytest.raises(InvalidWaitingConditionError, match=message):
        validate_waiting_condition(condition)
    with pytest.raises(ValueError, match=message):
        evaluate_wait(condition, state())


def test_server_owned_firing_time_is_rejected() -> None:
    condition = waiting(ANY, timers=[timer()])
    condition.timer_conditions[0].firing_unix_timestamp_seconds = 123
    with pytest.raises(InvalidWaitingConditionError, match="firing_unix_timestamp_seconds"):
        validate_waiting_condition(condition)


def test_sub_flow_conditions_wait_for_closed_children() -> None:
    both = waiting(ALL, timers=[timer(cid="t")])
    both.sub_flow_conditions.add(condition_id="s", sub_flow_type="F", start_step_type="S")
    both.sub_flow_conditions.add(condition_id="u", sub_flow_type="F", start_step_type="S")
    closed = WaitState(frozenset({0}), {}, closed_sub_flows=frozenset({0}))
    assert evaluate_wait(both, closed) is None
    all_closed = WaitState(frozenset({0}), {}, closed_sub_flows=frozenset({0, 1}))
    assert evaluate_wait(both, all_closed) == outcome(timers=(0,))
    either = waiting(ANY)
    either.sub_flow_conditions.add(sub_flow_type="F", start_step_type="S")
    either.sub_flow_conditions.add(sub_flow_type="F", start_step_type="S")
    assert evaluate_wait(either, state()) is None
    one = WaitState(frozenset(), {}, closed_sub_flows=frozenset({1}))
    assert evaluate_wait(either, one) == outcome()
    combo = waiting(COMBO, channels=[channel("a", cid="c")], combos=[["c", "s"]])
    combo.sub_flow_conditions.add(condition_id="s", sub_flow_type="F", start_step_type="S")
    assert evaluate_wait(combo, state(a=1)) is None
    ready = WaitState(frozenset(), {"a": 1}, closed_sub_flows=frozenset({0}))
    assert evaluate_wait(combo, ready) == outcome(takes=((0, 1),))


def test_sub_flow_condition_needs_a_flow_type() -> None:
    condition = waiting(ANY)
    condition.sub_flow_conditions.add(condition_id="s", start_step_type="S")
    with pytest.raises(InvalidWaitingConditionError, match="empty sub_flow_type"):
        validate_waiting_condition(condition)


def test_bad_state_is_rejected() -> None:
    condition = waiting(ANY, timers=[timer()])
    with pytest.raises(ValueError, match="outside"):
        evaluate_wait(condition, state({1}))
    with pytest.raises(ValueError, match="negative size"):
        evaluate_wait(waiting(ANY, channels=[channel("a")]), state(a=-1))


def test_unset_bounds_validate() -> None:
    validate_waiting_condition(waiting(ANY, channels=[channel("a", at_most=0)]))
    validate_waiting_condition(waiting(ANY, channels=[channel("a", at_least=2, at_most=2)]))


# --- properties -----------------------------------------------------------

CHANNEL_NAMES = ("a", "b")


@st.composite
def channel_conditions(draw: st.DrawFn) -> dex_pb2.ChannelCondition:
    name = draw(st.sampled_from(CHANNEL_NAMES))
    at_least = draw(st.one_of(st.none(), st.integers(0, 4)))
    at_most = draw(st.one_of(st.none(), st.integers(at_least or 0, 5)))
    return channel(name, at_least=at_least, at_most=at_most)


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[dex_pb2.WaitingCondition, WaitState]:
    kind = draw(st.sampled_from([ALL, ANY, COMBO]))
    timer_count = draw(st.integers(0, 3))
    channels = draw(st.lists(channel_conditions(), max_size=4))
    if kind == COMBO and timer_count + len(channels) == 0:
        channels = [channel("a")]
    timers = [timer(cid=f"t{i}") for i in range(timer_count)]
    for index, condition in enumerate(channels):
        condition.condition_id = f"c{index}"
    ids = [t.condition_id for t in timers] + [c.condition_id for c in channels]
    combos: list[list[str]] | None = None
    if kind == COMBO:
        combos = draw(
            st.lists(
                st.lists(st.sampled_from(ids), min_size=1, unique=True), min_size=1, max_size=3
            )
        )
    fired: frozenset[int] = draw(st.frozensets(st.integers(0, max(timer_count - 1, 0))))
    if timer_count == 0:
        fired = frozenset[int]()
    sizes = draw(st.fixed_dictionaries({name: st.integers(0, 8) for name in CHANNEL_NAMES}))
    condition = waiting(kind, timers=timers, channels=channels, combos=combos)
    return condition, WaitState(fired_timers=fired, channel_sizes=sizes)


def feasible(
    condition: dex_pb2.WaitingCondition,
    timers: list[int],
    channels: list[int],
    fired: frozenset[int],
    sizes: Mapping[str, int],
) -> bool:
    """Oracle: a member set holds when its timers fired and minimums fit per channel."""
    if not all(t in fired for t in timers):
        return False
    needed: dict[str, int] = {}
    for index in channels:
        cond = condition.channel_conditions[index]
        needed[cond.channel_name] = needed.get(cond.channel_name, 0) + channel_bounds(cond).minimum
    return all(sizes.get(name, 0) >= count for name, count in needed.items())


def member_sets(condition: dex_pb2.WaitingCondition) -> list[tuple[list[int], list[int]]]:
    timers = list(range(len(condition.timer_conditions)))
    channels = list(range(len(condition.channel_conditions)))
    if condition.waiting_condition_type == ALL:
        return [(timers, channels)]
    if condition.waiting_condition_type == ANY:
        no_members: list[int] = []
        return [([t], no_members) for t in timers] + [(no_members, [c]) for c in channels]
    by_id_t = {t.condition_id: i for i, t in enumerate(condition.timer_conditions)}
    by_id_c = {c.condition_id: i for i, c in enumerate(condition.channel_conditions)}
    return [
        (
            [by_id_t[i] for i in combo.condition_ids if i in by_id_t],
            sorted(by_id_c[i] for i in combo.condition_ids if i in by_id_c),
        )
        for combo in condition.condition_combinations
    ]


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_outcome_matches_first_feasible_member_set(
    scenario: tuple[dex_pb2.WaitingCondition, WaitState],
) -> None:
    condition, wait_state = scenario
    result = evaluate_wait(condition, wait_state)
    sets = member_sets(condition)
    if not condition.timer_conditions and not condition.channel_conditions:
        assert result == outcome()
        return
    winners = [
        s
        for s in sets
        if feasible(condition, s[0], s[1], wait_state.fired_timers, wait_state.channel_sizes)
    ]
    if not winners:
        assert result is None
        return
    assert result is not None
    assert result.completed_timers == tuple(sorted(wait_state.fired_timers))
    assert [index for index, _ in result.channel_takes] == winners[0][1]
    taken: dict[str, int] = {}
    for index, count in result.channel_takes:
        bounds = channel_bounds(condition.channel_conditions[index])
        assert count >= bounds.minimum
        assert bounds.maximum is None or count <= bounds.maximum
        name = condition.channel_conditions[index].channel_name
        taken[name] = taken.get(name, 0) + count
    for name, count in taken.items():
        assert count <= wait_state.channel_sizes.get(name, 0)
    # Greedy extras: a condition left below its maximum means its channel is drained.
    for index, count in result.channel_takes:
        bounds = channel_bounds(condition.channel_conditions[index])
        name = condition.channel_conditions[index].channel_name
        if bounds.maximum is None or count < bounds.maximum:
            assert taken[name] == wait_state.channel_sizes.get(name, 0)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.integers(0, 5), st.sampled_from(CHANNEL_NAMES))
def test_more_messages_never_unsatisfy(
    scenario: tuple[dex_pb2.WaitingCondition, WaitState], extra: int, name: str
) -> None:
    condition, wait_state = scenario
    before = evaluate_wait(condition, wait_state)
    sizes = dict(wait_state.channel_sizes)
    sizes[name] = sizes.get(name, 0) + extra
    after = evaluate_wait(condition, WaitState(wait_state.fired_timers, sizes))
    if before is not None:
        assert after is not None
