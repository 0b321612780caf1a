"""Hostile input on every session RPC (property-based), against a real engine and Worker.

Each call gets ``False``, a page, a snapshot or a clear error: never a hang, a
crashed Worker or a corrupted session, and the session still answers afterwards.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import dex
import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pb_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dex_agents import AgentSessionFlow, AgentSessionOptions, create_agent_session_flow
from dex_agents.models import ScriptedModelClient, ScriptedModelReply
from dex_agents.session._read_rules import text_fits
from dex_agents.stepwise import AgentDefinition, StepwiseRunner
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
from dex_agents.values import (
    AgentUserMessage,
    AnswerQuestionInput,
    CancelTurnInput,
    DeleteQueuedMessageInput,
    ExecutePlanInput,
    ListAgentMessagesInput,
    ResolveInterruptInput,
    SteerUserMessageInput,
    UpdateSessionSettingsInput,
    session_settings_size,
)
from dex_local_engine import LocalEngine

T = TypeVar("T")
SESSION = "hostile"
CALL_SECONDS = 60.0
LIMIT = 8 * 1024
HOSTILE = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Harness:
    """A session on an engine, driven from a loop on its own thread (hypothesis is sync)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.engine = LocalEngine()
        self.engine.start()
        definition = AgentDefinition(
            name="hostile",
            instructions="",
            model=ScriptedModelClient(lambda request: ScriptedModelReply(text="ok")),
        )
        # A small message limit keeps the many accepted messages under the 4 MiB a turn
        # Step may load (every turn loads every message until archive chunks exist).
        self.flow: AgentSessionFlow = create_agent_session_flow(
            StepwiseRunner(definition),
            "HostileTest",
            AgentSessionOptions(max_user_message_bytes=LIMIT),
        )
        self.environment: AgentTestEnvironment = self.run(
            AgentTestEnvironment.start(
                flows=[self.flow], server_address=self.engine.address, worker_in_process=True
            )
        )
        self.sessions = AgentSessionTestClient(self.environment.client, self.flow)
        self.run(self.sessions.start_session(SESSION, "hello"))
        self.run(self.sessions.wait_for_completed_turns(SESSION, 1))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_SECONDS)

    def rpc(self, method: Any, *args: Any) -> Any:
        return self.run(self.environment.client.invoke_rpc(method, *args))

    def close(self) -> None:
        self.run(self.environment.client.stop_flow(SESSION))
        self.run(self.environment.close())
        self.engine.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    made = Harness()
    yield made
    # The session survived everything: a plain message still gets its turn.
    turns = made.run(made.sessions.snapshot(SESSION)).state.turn_count
    queued = len(made.run(made.sessions.snapshot(SESSION)).queued_messages)
    assert made.run(made.sessions.send_user_message(SESSION, "still there?"))
    made.run(made.sessions.wait_for_completed_turns(SESSION, turns + queued + 1))
    made.close()


texts = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["", " ", "\t\n", "\u2003", "\x00", "\ud800"]),
    st.integers(LIMIT - 2, LIMIT + 2).map(lambda n: "x" * n),
    st.integers(LIMIT // 6 - 1, LIMIT // 6 + 1).map(lambda n: "\u00e9" * n),
)
ids = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\t\n", "/", "call-0-0", "interrupt-1", "a/b", "x" * 5000]),
)
sessions = st.sampled_from([SESSION, "no-such-session", "", "x" * 300])


@HOSTILE
@given(text=texts, plan_mode=st.booleans())
def test_send_user_message_accepts_exactly_the_storable_messages(
    harness: Harness, text: str, plan_mode: bool
) -> None:
    message = AgentUserMessage(text=text, plan_mode=plan_mode)
    accepted = harness.rpc(harness.flow.send_user_message, SESSION, message)
    expected = bool(text.strip()) and not plan_mode and text_fits(text, LIMIT)
    assert accepted is expected


@HOSTILE
@given(interrupt_id=ids, approved=st.booleans(), message=st.none() | texts)
def test_resolve_interrupt_with_nothing_pending_is_false(
    harness: Harness, interrupt_id: str, approved: bool, message: str | None
) -> None:
    request = ResolveInterruptInput(
        interrupt_id=interrupt_id, approved=approved, rejection_message=message
    )
    assert harness.rpc(harness.flow.resolve_interrupt, SESSION, request) is False


@HOSTILE
@given(interrupt_id=ids, answer=texts)
def test_answer_question_with_nothing_pending_is_false(
    harness: Harness, interrupt_id: str, answer: str
) -> None:
    request = AnswerQuestionInput(interrupt_id=interrupt_id, answer=answer)
    assert harness.rpc(harness.flow.answer_question, SESSION, request) is False


@HOSTILE
@given(
    before=st.none() | st.integers(-(2**63), 2**63 - 1),
    page=st.none() | st.integers(-(2**31), 2**31),
)
def test_list_agent_messages_pages_any_bounds(
    harness: Harness, before: int | None, page: int | None
) -> None:
    result = harness.rpc(
        harness.flow.list_agent_messages,
        SESSION,
        ListAgentMessagesInput(before_sequence=before, limit=page),
    )
    assert len(result.messages) <= 200
    sequences = [m.sequence for m in result.messages]
    assert sequences == sorted(sequences)
    if before is not None:
        assert all(s < before for s in sequences)


@HOSTILE
@given(text=st.none() | texts, message_id=st.none() | ids)
def test_steer_user_message_refuses_what_it_cannot_store(
    harness: Harness, text: str | None, message_id: str | None
) -> None:
    request = SteerUserMessageInput(message_id=message_id, text=text)
    try:
        accepted = harness.rpc(harness.flow.steer_user_message, SESSION, request)
    except dex.ChannelMessageNotFoundError:
        assert message_id is not None  # only a queued message can be consumed meanwhile
        return
    assert isinstance(accepted, bool)
    if (text is None) == (message_id is None) or (
        text is not None and (not text.strip() or not text_fits(text, LIMIT))
    ):
        assert accepted is False
    elif message_id is not None:
        assert accepted is False  # no queued message has an ID hypothesis can make up


@HOSTILE
@given(message_id=ids)
def test_delete_queued_message_of_an_unknown_id_is_false(harness: Harness, message_id: str) -> None:
    request = DeleteQueuedMessageInput(message_id=message_id)
    assert harness.rpc(harness.flow.delete_queued_message, SESSION, request) is False


@HOSTILE
@given(turn_id=ids)
def test_cancel_turn_of_another_turn_is_false(harness: Harness, turn_id: str) -> None:
    snapshot = harness.run(harness.sessions.snapshot(SESSION))
    active = snapshot.state.active_turn_id if snapshot.state is not None else None
    accepted = harness.rpc(harness.flow.cancel_turn, SESSION, CancelTurnInput(turn_id=turn_id))
    if turn_id != active:
        assert accepted is False


@HOSTILE
@given(revision=st.integers(-(2**63), 2**63 - 1))
def test_execute_plan_without_a_plan_is_false(harness: Harness, revision: int) -> None:
    request = ExecutePlanInput(revision=revision)
    assert harness.rpc(harness.flow.execute_plan, SESSION, request) is False


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


@HOSTILE
@given(
    settings=st.none()
    | st.dictionaries(st.text(max_size=20), json_values, max_size=8)
    | st.integers(1_000, 20_000).map(lambda n: {"filler": "x" * n})
)
def test_update_session_settings_stores_only_what_fits(
    harness: Harness, settings: dict[str, Any] | None
) -> None:
    request = UpdateSessionSettingsInput(session_settings=settings)
    accepted = harness.rpc(harness.flow.update_session_settings, SESSION, request)
    if settings is None or session_settings_size(settings) > 17 * 1024:
        assert accepted is False
    else:
        assert isinstance(accepted, bool)
    if accepted:
        stored = harness.run(harness.sessions.snapshot(SESSION)).session_settings
        assert dict(stored) == settings


@HOSTILE
@given(session=sessions)
def test_reads_of_unknown_sessions_fail_clearly(harness: Harness, session: str) -> None:
    if session == SESSION:
        assert harness.rpc(harness.flow.get_agent_snapshot, session).state is not None
        return
    with pytest.raises((dex.FlowNotFoundError, dex.DexServiceError, ValueError)):
        harness.rpc(harness.flow.get_agent_snapshot, session)


wrong_inputs = st.one_of(
    st.binary(max_size=100),
    st.sampled_from([b"null", b"[]", b"42", b'"text"', b"{}", b'{"text": 7}', b'{"text": null}']),
    st.dictionaries(st.text(max_size=10), st.none() | st.integers() | st.text(max_size=10)).map(
        lambda d: json.dumps(d).encode()
    ),
)
rpc_names = st.sampled_from(
    [
        "send_user_message",
        "resolve_interrupt",
        "answer_question",
        "list_agent_messages",
        "steer_user_message",
        "delete_queued_message",
        "cancel_turn",
        "execute_plan",
        "update_session_settings",
    ]
)


@HOSTILE
@given(rpc_name=rpc_names, payload=wrong_inputs)
def test_inputs_of_the_wrong_shape_get_a_clear_error_or_false(
    harness: Harness, rpc_name: str, payload: bytes
) -> None:
    with grpc.insecure_channel(harness.engine.address) as channel:
        stub = pb_grpc.FlowServiceStub(channel)
        request = pb.InvokeRPCRequest(
            flow_id=SESSION,
            rpc_name=rpc_name,
            input=pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=payload)),
        )
        try:
            response = stub.InvokeRPC(request, timeout=CALL_SECONDS)
        except grpc.RpcError as error:
            failure = error
        else:
            assert response.HasField("output")  # the input was a valid value after all
            return
    assert failure.code() != grpc.StatusCode.UNKNOWN  # type: ignore[attr-defined]
    assert failure.details()  # type: ignore[attr-defined]


def _valid_request(rpc_name: str, text: str) -> Any:
    """A well-formed input for ``rpc_name`` (nothing it names exists)."""
    return {
        "send_user_message": AgentUserMessage(text=text or "hi"),
        "resolve_interrupt": ResolveInterruptInput(interrupt_id="interrupt-1", approved=True),
        "answer_question": AnswerQuestionInput(interrupt_id="interrupt-1", answer=text),
        "list_agent_messages": ListAgentMessagesInput(),
        "steer_user_message": SteerUserMessageInput(text=text or "hi"),
        "delete_queued_message": DeleteQueuedMessageInput(message_id="message-1"),
        "cancel_turn": CancelTurnInput(turn_id="turn-1"),
        "execute_plan": ExecutePlanInput(revision=1),
        "update_session_settings": UpdateSessionSettingsInput(session_settings={"a": text}),
    }[rpc_name]


@HOSTILE
@given(
    rpc_name=rpc_names,
    session=st.sampled_from(["no-such-session", "", " ", "a/b", "x" * 300]) | st.text(max_size=30),
    text=st.text(max_size=20),
)
def test_every_rpc_on_a_session_that_does_not_exist_fails_clearly(
    harness: Harness, rpc_name: str, session: str, text: str
) -> None:
    if session == SESSION:
        return
    method = getattr(harness.flow, rpc_name)
    with pytest.raises((dex.FlowNotFoundError, dex.DexServiceError, ValueError)) as raised:
        harness.rpc(method, session, _valid_request(rpc_name, text))
    assert str(raised.value)


no_op_calls = st.sampled_from(
    [
        "resolve_interrupt",
        "answer_question",
        "delete_queued_message",
        "cancel_turn",
        "execute_plan",
    ]
)


@HOSTILE
@given(rpc_name=no_op_calls, copies=st.integers(2, 8), text=st.text(max_size=20))
def test_duplicate_concurrent_calls_that_name_nothing_are_all_false(
    harness: Harness, rpc_name: str, copies: int, text: str
) -> None:
    method = getattr(harness.flow, rpc_name)
    request = _valid_request(rpc_name, text)

    async def all_at_once() -> list[Any]:
        client = harness.environment.client
        return await asyncio.gather(
            *(client.invoke_rpc(method, SESSION, request) for _ in range(copies)),
            return_exceptions=True,
        )

    # A call that finds another holding the lock it needs says so; the rest say False.
    results = harness.run(all_at_once())
    assert all(r is False or isinstance(r, dex.RpcLockConflictError) for r in results), results
    assert False in results


@HOSTILE
@given(
    copies=st.integers(2, 8),
    settings=st.dictionaries(st.text(max_size=10), json_values, max_size=4),
)
def test_duplicate_concurrent_settings_updates_all_land_the_same_value(
    harness: Harness, copies: int, settings: dict[str, Any]
) -> None:
    request = UpdateSessionSettingsInput(session_settings=settings)

    async def all_at_once() -> list[Any]:
        client = harness.environment.client
        return await asyncio.gather(
            *(
                client.invoke_rpc(harness.flow.update_session_settings, SESSION, request)
                for _ in range(copies)
            ),
            return_exceptions=True,
        )

    results = harness.run(all_at_once())
    assert all(r is True or isinstance(r, dex.RpcLockConflictError) for r in results), results
    assert True in results
    assert dict(harness.run(harness.sessions.snapshot(SESSION)).session_settings) == settings
