"""``call_policy``: the one rule every runner resolves a tool call's policy with."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from dex_agents import ToolEffect, ToolPolicy
from dex_agents.runner import (
    BUILT_IN_TOOL_POLICY,
    AgentTurnContext,
    ResolvedToolPolicy,
    call_policy,
    default_requires_approval,
)
from dex_agents.testing import RecordingEventWriter


class _NotCancelled:
    def is_cancelled(self) -> bool:
        return False


async def _nothing(*_: Any) -> None:
    return None


def _turn(
    *,
    policies: Mapping[str, ToolPolicy] | None = None,
    default: ToolEffect = ToolEffect.UNCLASSIFIED,
    built_ins: tuple[str, ...] = (),
) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s-1",
        turn_id="turn-1",
        attempt=1,
        messages=(),
        framework_run_state=None,
        tool_calls=(),
        events=RecordingEventWriter(),
        cancellation=_NotCancelled(),
        deadline=datetime(2030, 1, 1, tzinfo=UTC),
        step_execution_id="step-1",
        tool_policies=dict(policies or {}),
        default_tool_effect=default,
        heartbeat=_nothing,
        enabled_built_in_tools=built_ins,
    )


def test_the_session_policy_wins_over_the_declaration() -> None:
    turn = _turn(policies={"refund": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    assert call_policy(
        turn,
        "refund",
        known=True,
        declared_effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        declared_approval=True,
    ) == ResolvedToolPolicy(ToolEffect.IDEMPOTENT_WRITE, False)
    strict = _turn(policies={"lookup": ToolPolicy(ToolEffect.READ, requires_approval=True)})
    assert call_policy(
        strict, "lookup", known=True, declared_effect="read", declared_approval=False
    ) == ResolvedToolPolicy(ToolEffect.READ, True)


def test_a_known_tool_gets_its_declaration_then_the_default_effect() -> None:
    turn = _turn()
    assert call_policy(
        turn, "lookup", known=True, declared_effect=ToolEffect.READ
    ) == ResolvedToolPolicy(ToolEffect.READ, False)
    # A declared approval wins over the effect's default, either way.
    assert call_policy(
        turn, "lookup", known=True, declared_effect="read", declared_approval=True
    ) == ResolvedToolPolicy(ToolEffect.READ, True)
    assert call_policy(
        turn, "charge", known=True, declared_effect="non_idempotent_write", declared_approval=False
    ) == ResolvedToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)
    # Nothing declared: the session's default effect and its approval.
    assert call_policy(turn, "plain", known=True) == ResolvedToolPolicy(
        ToolEffect.UNCLASSIFIED, True
    )
    assert call_policy(
        _turn(default=ToolEffect.READ), "plain", known=True, declared_approval=True
    ) == ResolvedToolPolicy(ToolEffect.READ, True)


@pytest.mark.parametrize("default", list(ToolEffect))
def test_a_tool_the_runner_does_not_have_gets_the_session_default(default: ToolEffect) -> None:
    turn = _turn(default=default)
    expected = ResolvedToolPolicy(default, default_requires_approval(default))
    assert call_policy(turn, "invented", known=False) == expected
    # The same as a known tool that declares nothing.
    assert call_policy(turn, "invented", known=False) == call_policy(turn, "plain", known=True)


def test_a_tool_the_runner_does_not_have_still_gets_its_session_policy() -> None:
    turn = _turn(policies={"later": ToolPolicy(ToolEffect.READ)})
    assert call_policy(turn, "later", known=False) == ResolvedToolPolicy(ToolEffect.READ, False)


def test_an_enabled_built_in_tool_is_the_sessions() -> None:
    turn = _turn(
        policies={"ask_user": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}, built_ins=("ask_user",)
    )
    assert call_policy(turn, "ask_user", known=False) == BUILT_IN_TOOL_POLICY
    assert call_policy(turn, "ask_user", known=True, declared_effect="unclassified") == (
        BUILT_IN_TOOL_POLICY
    )
    # A built-in tool the session has not enabled is any other name.
    assert call_policy(_turn(), "ask_user", known=False) == ResolvedToolPolicy(
        ToolEffect.UNCLASSIFIED, True
    )


def test_bad_declarations_are_refused() -> None:
    turn = _turn()
    with pytest.raises(ValueError, match="'invented' is not known to the runner"):
        call_policy(turn, "invented", known=False, declared_effect=ToolEffect.READ)
    with pytest.raises(ValueError, match="'invented' is not known to the runner"):
        call_policy(turn, "invented", known=False, declared_approval=False)
    with pytest.raises(ValueError, match="unknown tool effect 'writes'"):
        call_policy(turn, "refund", known=True, declared_effect="writes")
    with pytest.raises(TypeError, match="declared_approval of tool 'refund'"):
        call_policy(turn, "refund", known=True, declared_approval="yes")  # type: ignore[arg-type]
