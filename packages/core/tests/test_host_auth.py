"""AgentHost against an engine that requires a bearer token: ``auth_token=`` or
``DEX_SERVER_TOKEN`` gets the Client and the Worker in; a wrong or missing token fails
``start()`` with an error that names authentication and what to check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import dex
import grpc
import pytest

from dex_agents import AgentHost, AgentSessionClient, AgentSessionFlow, AuthenticationError
from dex_agents.models import ModelRequest, ScriptedModelClient, ScriptedModelReply
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow
from dex_agents.testing import PrivateDexEngine

TOKEN = "deploy-token-7c1e"
EXPECTED_REPLY = "heard: hello"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text=f"heard: {ScriptedModelClient.user_texts(request)[-1]}")


def _build_flow() -> AgentSessionFlow:
    definition = AgentDefinition(
        name="auth", instructions="Echo.", model=ScriptedModelClient(_reply)
    )
    return create_stepwise_session_flow(definition, "AuthTestAgent")


async def _run_turn(sessions: AgentSessionClient, session_id: str) -> str:
    await sessions.start_session(session_id, "hello")
    snapshot = await sessions.wait_for_turn(session_id, 0)
    reply = snapshot.messages[-1].text
    assert reply is not None
    return reply


@pytest.fixture(scope="module")
def guarded_engine() -> Iterator[PrivateDexEngine]:
    """``dex-local-engine serve --token-file``: every call must carry ``TOKEN``."""
    with PrivateDexEngine.start(token=TOKEN) as engine:
        yield engine


async def test_the_right_token_runs_a_turn_through_worker_only_and_client_only_hosts(
    guarded_engine: PrivateDexEngine,
) -> None:
    address = guarded_engine.server_address
    flow = _build_flow()
    worker_host = AgentHost(flow, server_address=address, auth_token=TOKEN, client=False)
    await worker_host.start()
    try:
        assert worker_host.authenticates
        async with AgentHost(
            flow, server_address=address, auth_token=TOKEN, worker=False
        ) as client_host:
            assert await _run_turn(client_host.client(), "auth-split-1") == EXPECTED_REPLY
    finally:
        await worker_host.stop()


async def test_the_token_variable_is_read_when_auth_token_is_not_given(
    guarded_engine: PrivateDexEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEX_SERVER_TOKEN", TOKEN)
    monkeypatch.setenv("DEX_SERVER_ADDRESS", guarded_engine.server_address)
    async with AgentHost(_build_flow()) as host:
        assert host.authenticates
        assert await _run_turn(host.client(), "auth-variable-1") == EXPECTED_REPLY


async def test_a_token_file_credential_works_too(
    guarded_engine: PrivateDexEngine, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n", encoding="utf-8")
    credential = dex.FileCredential(token_file)
    async with AgentHost(
        _build_flow(), server_address=guarded_engine.server_address, auth_token=credential
    ) as host:
        assert await _run_turn(host.client(), "auth-file-1") == EXPECTED_REPLY


@pytest.mark.parametrize(
    ("worker", "client", "who"),
    [(True, False, "Worker"), (False, True, "Client"), (True, True, "Client")],
    ids=["worker-only", "client-only", "both"],
)
async def test_a_wrong_token_fails_start_naming_authentication(
    guarded_engine: PrivateDexEngine, worker: bool, client: bool, who: str
) -> None:
    host = AgentHost(
        _build_flow(),
        server_address=guarded_engine.server_address,
        auth_token="not-the-token",
        worker=worker,
        client=client,
    )
    with pytest.raises(AuthenticationError) as raised:
        await host.start()
    message = str(raised.value)
    assert message.startswith("authentication failed")
    assert f"refused the {who}'s bearer token" in message
    assert "DEX_SERVER_TOKEN" in message
    assert "--token-file" in message
    assert "incompatible" not in message
    assert "protocol" not in message
    assert raised.value.address == guarded_engine.server_address
    assert host.worker is None


async def test_a_missing_token_says_none_was_sent(
    guarded_engine: PrivateDexEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEX_SERVER_TOKEN", raising=False)
    host = AgentHost(_build_flow(), server_address=guarded_engine.server_address, client=False)
    assert not host.authenticates
    with pytest.raises(AuthenticationError, match=r"the Worker sent none.*DEX_SERVER_TOKEN"):
        await host.start()


def test_bad_tokens_are_refused_when_the_host_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    address = "127.0.0.1:1"
    with pytest.raises(TypeError, match=r"auth_token must be a str or a dex\.Credential, not int"):
        AgentHost(_build_flow(), server_address=address, auth_token=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="auth_token must not be empty"):
        AgentHost(_build_flow(), server_address=address, auth_token="  ")
    with pytest.raises(ValueError, match="printable ASCII without spaces"):
        AgentHost(_build_flow(), server_address=address, auth_token="two words")
    with pytest.raises(ValueError, match="auth_token is for a Dex server"):
        AgentHost(_build_flow(), auth_token=TOKEN)
    monkeypatch.setenv("DEX_SERVER_TOKEN", "bad\ttoken")
    with pytest.raises(ValueError, match="DEX_SERVER_TOKEN must be printable"):
        AgentHost(_build_flow(), server_address=address)
    # The variable is for a Dex server: the embedded engine ignores it.
    assert not AgentHost(_build_flow()).authenticates


async def test_a_host_started_before_its_engine_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from dex_agents.testing import find_free_loopback_ports
    from dex_local_engine import EngineServer

    (port,) = find_free_loopback_ports(1)
    address = f"127.0.0.1:{port}"
    caplog.set_level(logging.INFO, logger="dex_agents.host")
    worker_host = AgentHost(_build_flow(), server_address=address, client=False)
    starting = asyncio.create_task(worker_host.start())
    async with asyncio.timeout(60):
        while "waiting up to 60 s for the Dex server" not in caplog.text:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    engine = EngineServer(":memory:", "127.0.0.1", port)
    await engine.start()
    try:
        await starting
        async with AgentHost(_build_flow(), server_address=address, worker=False) as client_host:
            assert await _run_turn(client_host.client(), "late-engine-1") == EXPECTED_REPLY
        await worker_host.stop()
    finally:
        await engine.stop()


async def test_the_testing_history_and_attribute_reads_send_the_token(
    guarded_engine: PrivateDexEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dex_agents.testing import read_step_history, read_stored_attributes

    address = guarded_engine.server_address
    async with AgentHost(_build_flow(), server_address=address, auth_token=TOKEN) as host:
        await _run_turn(host.client(), "auth-reads-1")
    assert await read_step_history(address, "auth-reads-1", token=TOKEN)
    assert await read_stored_attributes(address, "auth-reads-1", token=TOKEN)
    monkeypatch.setenv("DEX_SERVER_TOKEN", TOKEN)
    assert await read_step_history(address, "auth-reads-1")
    monkeypatch.setenv("DEX_SERVER_TOKEN", "bad\ttoken")
    with pytest.raises(ValueError, match="DEX_SERVER_TOKEN must be printable"):
        await read_step_history(address, "auth-reads-1")
    monkeypatch.delenv("DEX_SERVER_TOKEN")
    with pytest.raises(grpc.RpcError):
        await read_step_history(address, "auth-reads-1")
