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

from dex_agents import (
    AgentUserMessage,
    AnswerQuestionInput,
    ListAgentMessagesInput,
    ResolveInterruptInput,
)
from dex_agents.models import ScriptedModelClient, ScriptedModelReply
from dex_agents.session import AgentSessionFlow, AgentSessionOptions, create_agent_session_flow
from dex_agents.session.read_rules import text_fits
from dex_agents.stepwise import AgentDefinition, StepwiseRunner
from dex_agents.testing import AgentSessionTestClient, AgentTestEnvironment
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
    st.text(max_size=40), st.sampled_from(["", "/", "call-0-0", "interrupt-1", "a/b", "x" * 5000])
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
    ["send_user_message", "resolve_interrupt", "answer_question", "list_agent_messages"]
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
