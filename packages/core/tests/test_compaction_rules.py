"""Pure rules of compaction: the policy, cut points, summary input, cutoff checks."""

from __future__ import annotations

import pytest

from dex_agents import CompactionPolicy
from dex_agents._compaction import compaction_cutoff_is_new, record_summary
from dex_agents.runner import (
    CONTEXT_SUMMARY_NOTE_HEADER,
    ContextSummaryResult,
    CutItem,
    RunnerDefectError,
    cut_points,
    select_cut,
    summary_input_text,
)
from dex_agents.values import AgentMessage, AgentState, AgentStatus, AgentUsage, ContextSummary


def test_policy_defaults_and_checks() -> None:
    policy = CompactionPolicy(context_window_tokens=1000)
    assert (policy.trigger_ratio, policy.retained_ratio) == (0.85, 0.3)
    assert (policy.trigger_tokens, policy.retained_token_budget) == (850, 300)
    with pytest.raises(ValueError, match="context_window_tokens"):
        CompactionPolicy(context_window_tokens=0)
    with pytest.raises(ValueError, match="below trigger_ratio"):
        CompactionPolicy(context_window_tokens=10, trigger_ratio=0.3, retained_ratio=0.5)


def test_cuts_never_separate_a_call_from_its_result_and_fall_mid_turn() -> None:
    items = [
        CutItem(10),  # user
        CutItem(10, opens=frozenset({"a", "b"})),  # model asks for two calls
        CutItem(10, answers=frozenset({"a"})),
        CutItem(10, answers=frozenset({"b"})),
        CutItem(10, opens=frozenset({"c"})),  # the same turn's second response
        CutItem(10, answers=frozenset({"c"})),
        CutItem(10),  # final answer
    ]
    assert cut_points(items) == [1, 4, 6, 7]
    assert select_cut(items, retained_token_budget=35) == 4
    assert select_cut(items, retained_token_budget=15) == 6
    # Nothing fits: the latest cut before the newest message, so one turn is cut mid-way.
    assert select_cut(items, retained_token_budget=0) == 6
    assert select_cut(items[:2], retained_token_budget=0) == 1
    assert select_cut(items[:1], retained_token_budget=0) is None


def message(sequence: int, text: str) -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role="user", framework_item="{}", text=text
    )


def test_summary_input_starts_with_the_earlier_summary_and_leaves_out_the_oldest() -> None:
    previous = ContextSummary(generation=1, last_sequence=2, summary="older facts")
    messages = [message(n, "x" * 400) for n in range(3, 8)]
    text, omitted = summary_input_text(messages, previous, token_budget=10_000)
    assert omitted == 0
    assert text.startswith(f"{CONTEXT_SUMMARY_NOTE_HEADER}\nolder facts")
    text, omitted = summary_input_text(messages, previous, token_budget=250)
    assert omitted == 3
    assert "3 older messages were left out" in text


def test_cutoffs_and_summaries_are_checked() -> None:
    summary = ContextSummary(generation=1, last_sequence=5, summary="s")
    assert not compaction_cutoff_is_new(None, summary=summary, message_count=9)
    assert not compaction_cutoff_is_new(5, summary=summary, message_count=9)
    assert compaction_cutoff_is_new(6, summary=summary, message_count=9)
    with pytest.raises(RunnerDefectError, match="past the last stored message"):
        compaction_cutoff_is_new(10, summary=summary, message_count=9)
    state = AgentState(status=AgentStatus.COMPACTING_CONTEXT, active_turn_id="turn-3")
    new, after, usage, events = record_summary(
        state,
        summary,
        ContextSummaryResult("new", AgentUsage(model_calls=1)),
        through_sequence=8,
        session_usage=AgentUsage(model_calls=4),
    )
    assert (new.generation, new.last_sequence, new.summary) == (2, 8, "new")
    assert after.status is AgentStatus.RUNNING_MODEL
    assert usage.model_calls == 5
    assert [event for event, _ in events] == ["usage_recorded", "compaction_finished"]
    with pytest.raises(RunnerDefectError, match="empty summary"):
        record_summary(
            state, None, ContextSummaryResult(" "), through_sequence=8, session_usage=usage
        )
