"""AgentTestEnvironment with an in-process Worker, and the session client's waits and events."""

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, create_agent_session_flow
from dex_agents.testing import (
    SCRIPTED_FLOW_FACTORY,
    STATE_DIRECTORY_VARIABLE,
    AgentSessionTestClient,
    AgentTestEnvironment,
    ModelScript,
    ModelTurn,
    PollTimeoutError,
    PrivateDexEngine,
    Scenario,
    ScenarioSession,
    ScenarioTool,
    ScriptedRunner,
    ToolCallSpec,
    build_scenario_flow,
    build_scripted_flow,
)
from dex_agents.values import AgentToolCallStatus, ToolEffect

CHARGE = ScenarioTool("charge_card", ToolEffect.NON_IDEMPOTENT_WRITE, text="charged")
SCRIPT = ModelScript(
    [
        ModelTurn(tool_calls=[ToolCallSpec("charge_card", {"amount": 5})]),
        ModelTurn(text_from_tool_results=True),
    ]
)


@pytest.fixture(scope="module")
def engine() -> Iterator[PrivateDexEngine]:
    with PrivateDexEngine.start() as running:
        yield running


async def test_waits_follow_a_session_through_an_approval(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    flow = build_scripted_flow(SCRIPT, [CHARGE], tmp_path, ScenarioSession("ClientApproval"))
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        assert environment.has_worker
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"s-{uuid.uuid4().hex}"
        await sessions.start_session(session_id, "charge 5")
        interrupt = await sessions.wait_for_pending_interrupt(session_id, "charge_card")
        record = await sessions.wait_for_tool_call(
            session_id, interrupt.tool_call_id, AgentToolCallStatus.AWAITING_APPROVAL
        )
        assert record.tool_name == "charge_card"
        assert (await sessions.wait_for_pending_interrupts(session_id, 1))[0] == interrupt
        assert await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, True)
        assert not await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, True)
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        assert snapshot.messages[-1].text == "charge_card: charged"
        waiting = await sessions.wait_for_user_message_wait(session_id)
        assert waiting.state is not None
        assert waiting.state.turn_count == 1
        events = await sessions.read_events_through_turn(session_id, "turn-1")
        assert events[0].type == "turn_started"
        assert events[-1].type == "turn_completed"
        page = await sessions.list_messages(session_id, limit=1)
        assert [m.sequence for m in page.messages] == [snapshot.messages[-1].sequence]


async def test_a_wait_that_never_holds_says_what_it_waited_for_and_what_it_saw(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    flow = build_scripted_flow(
        ModelScript([ModelTurn(text="hi")]), [], tmp_path, ScenarioSession("ClientTimeout")
    )
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"s-{uuid.uuid4().hex}"
        await sessions.start_session(session_id, "hello")
        await sessions.wait_for_completed_turns(session_id, 1)
        with pytest.raises(PollTimeoutError, match=r"(?s)a pending interrupt.*AgentSnapshot"):
            await sessions.wait_for_pending_interrupt(session_id, within=timedelta(seconds=1))
        with pytest.raises(TimeoutError, match="no end of turn-2"):
            await sessions.read_events_through_turn(
                session_id, "turn-2", within=timedelta(seconds=2)
            )


async def test_an_environment_without_a_worker_can_start_one_later(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    flow = build_scripted_flow(
        ModelScript([ModelTurn(text="late")]), [], tmp_path, ScenarioSession("ClientLate")
    )
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow]
    ) as environment:
        assert not environment.has_worker
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"s-{uuid.uuid4().hex}"
        await sessions.start_session(session_id, "hello")
        await environment.start_worker()
        with pytest.raises(RuntimeError, match="already running"):
            await environment.start_worker()
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        assert snapshot.messages[-1].text == "late"
        await environment.stop_worker()
        assert not environment.has_worker


async def test_an_environment_needs_a_flow() -> None:
    with pytest.raises(ValueError, match="at least one Flow"):
        await AgentTestEnvironment.start(server_address="127.0.0.1:1", flows=[])


def test_scenario_flows_are_rebuilt_from_the_state_directory(tmp_path: Path) -> None:
    scenario = Scenario(SCRIPT, [CHARGE], ScenarioSession("Rebuilt"))
    scenario.write(tmp_path)
    flow = build_scenario_flow("dex_agents.testing._scenario_flow:build_scripted_flow", tmp_path)
    assert flow.get_flow_type() == "Rebuilt"
    with pytest.raises(TypeError, match=r"returned NoneType, not a dex\.Flow"):
        build_scenario_flow("builtins:print", tmp_path)
    with pytest.raises(ValueError, match="expected 'module:attribute'"):
        build_scenario_flow("dex_agents.testing", tmp_path)


async def test_an_environment_without_an_address_owns_its_engine_and_worker_children(
    tmp_path: Path,
) -> None:
    scenario = Scenario(ModelScript([ModelTurn(text="from a child")]), [], ScenarioSession("Own"))
    scenario.write(tmp_path)
    flow = build_scenario_flow(SCRIPTED_FLOW_FACTORY, tmp_path)
    assert isinstance(flow, AgentSessionFlow)
    environment = await AgentTestEnvironment.start(flows=[flow])
    engine = environment.engine
    assert engine is not None
    assert engine.is_running()
    worker = environment.start_worker_process(
        log_path=tmp_path / "worker.log",
        entry_module="dex_agents.testing.scenario_worker",
        arguments=[SCRIPTED_FLOW_FACTORY],
        environment={STATE_DIRECTORY_VARIABLE: str(tmp_path)},
    )
    sessions = AgentSessionTestClient(environment.client, flow)
    session_id = f"s-{uuid.uuid4().hex}"
    await sessions.start_session(session_id, "hello")
    snapshot = await sessions.wait_for_completed_turns(session_id, 1)
    assert snapshot.messages[-1].text == "from a child"
    await environment.close()
    assert not worker.is_running()
    assert not engine.is_running()


async def test_answer_question_answers_a_built_in_ask_user_call(
    engine: PrivateDexEngine, tmp_path: Path
) -> None:
    script = ModelScript(
        [
            ModelTurn(
                tool_calls=[ToolCallSpec("ask_user", {"question": "Which size?", "choices": ["S"]})]
            ),
            ModelTurn(text_from_tool_results=True),
        ]
    )
    flow = create_agent_session_flow(
        ScriptedRunner(script, [], tmp_path), "ClientQuestion", built_in_tools=("ask_user",)
    )
    async with await AgentTestEnvironment.start(
        server_address=engine.server_address, flows=[flow], worker_in_process=True
    ) as environment:
        sessions = AgentSessionTestClient(environment.client, flow)
        session_id = f"s-{uuid.uuid4().hex}"
        await sessions.start_session(session_id, "buy a shirt")
        question = await sessions.wait_for_pending_interrupt(session_id, "ask_user")
        assert question.question == "Which size?"
        assert await sessions.answer_question(session_id, question.interrupt_id, "S")
        assert not await sessions.answer_question(session_id, question.interrupt_id, "S")
        snapshot = await sessions.wait_for_completed_turns(session_id, 1)
        answer = snapshot.messages[-1].text or ""
        assert answer.startswith("ask_user: ")
        assert json.loads(answer.removeprefix("ask_user: ")) == {
            "status": "answered",
            "answer": "S",
        }
