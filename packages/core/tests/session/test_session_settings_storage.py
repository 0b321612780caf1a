"""``SessionSettings`` holds the settings object as a JSON object, the shape a TypeScript
reader decodes, and a value an earlier build stored as JSON text still loads."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import dex
import pytest
from core_session_support import ScriptRunner, assistant_text, session_id, usage

from dex_agents import create_agent_session_flow
from dex_agents._session_settings import SESSION_SETTINGS_NEED_SESSION_CODECS
from dex_agents.runner import AgentTurnContext, TurnCompleted
from dex_agents.testing import read_stored_attributes
from dex_agents.values import AgentSessionStartInput, UpdateSessionSettingsInput


def _answer_with_settings(turn: AgentTurnContext) -> TurnCompleted:
    reply = f"settings {json.dumps(dict(turn.session_settings), sort_keys=True)}"
    return TurnCompleted(new_messages=[assistant_text(reply)], usage=usage())


async def _stored_settings(address: str, sid: str) -> tuple[str, Any]:
    """The Dex kind of the stored ``SessionSettings`` and the value it holds."""
    value = (await read_stored_attributes(address, sid))["SessionSettings"]
    kind = value.WhichOneof("kind")
    if kind == "obj_value":
        assert value.obj_value.encoding == "json"
        return kind, json.loads(value.obj_value.payload)
    return kind, value.string_value


async def test_settings_are_stored_as_a_json_object(harness_factory, engine) -> None:
    flow = create_agent_session_flow(ScriptRunner(_answer_with_settings), "SettingsObject")
    sid = session_id()
    async with harness_factory(flow) as harness:
        sessions = harness.sessions(flow)
        await sessions.start_session(sid, "hi", session_settings={"model": "large", "n": [1, 2]})
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        assert await _stored_settings(engine.address, sid) == (
            "obj_value",
            {"model": "large", "n": [1, 2]},
        )
        assert snapshot.messages[-1].text == 'settings {"model": "large", "n": [1, 2]}'
        assert await sessions.update_session_settings(sid, {"model": "small"})
        assert await _stored_settings(engine.address, sid) == ("obj_value", {"model": "small"})
        assert await sessions.update_session_settings(sid, {})
        assert await _stored_settings(engine.address, sid) == ("obj_value", {})
        assert (await sessions.snapshot(sid)).session_settings == {}


async def test_a_session_whose_settings_an_earlier_build_stored_as_text_still_loads(
    harness_factory, engine
) -> None:
    # Earlier builds stored the settings' JSON text as a Dex string. Seed exactly that
    # value, as such a Worker left it, and start the session without start settings.
    flow = create_agent_session_flow(ScriptRunner(_answer_with_settings), "SettingsLegacy")
    sid = session_id()
    legacy = dex.Attribute("SessionSettings", str)
    async with harness_factory(flow) as harness:
        await harness.client.start_flow(
            flow,
            sid,
            AgentSessionStartInput(),
            dex.StartFlowOptions().with_attribute(legacy, '{"model":"large"}'),
        )
        assert await _stored_settings(engine.address, sid) == (
            "string_value",
            '{"model":"large"}',
        )
        sessions = harness.sessions(flow)
        snapshot = await harness.wait_for(flow, sid, lambda s: s.state is not None)
        assert snapshot.session_settings == {"model": "large"}
        # The first turn runs with them and rewrites them as the object.
        assert await sessions.send_user_message(sid, "hi")
        snapshot = await harness.wait_for_turns(flow, sid, 1)
        assert snapshot.messages[-1].text == 'settings {"model": "large"}'
        assert await _stored_settings(engine.address, sid) == ("obj_value", {"model": "large"})
        assert snapshot.session_settings == {"model": "large"}


async def test_an_update_replaces_a_value_stored_as_text(harness_factory, engine) -> None:
    flow = create_agent_session_flow(ScriptRunner(_answer_with_settings), "SettingsLegacyUpdate")
    sid = session_id()
    legacy = dex.Attribute("SessionSettings", str)
    async with harness_factory(flow) as harness:
        await harness.client.start_flow(
            flow,
            sid,
            AgentSessionStartInput(),
            dex.StartFlowOptions().with_attribute(legacy, '{"model":"large"}'),
        )
        sessions = harness.sessions(flow)
        await harness.wait_for(flow, sid, lambda s: s.state is not None)
        assert await sessions.update_session_settings(sid, {"model": "small"})
        assert await _stored_settings(engine.address, sid) == ("obj_value", {"model": "small"})


async def test_dex_default_codecs_refuse_to_store_settings_and_say_why(
    harness_factory,
) -> None:
    # Dex's automatic codec reads an object of any JSON values but writes only {}; the
    # session says so instead of storing another shape.
    flow = create_agent_session_flow(ScriptRunner(_answer_with_settings), "SettingsDefaultCodecs")
    sid, other = session_id(), session_id()
    async with harness_factory(flow, session_codecs=False) as harness:
        sessions = harness.sessions(flow)
        await sessions.start_session(sid, "hi")
        await harness.wait_for_turns(flow, sid, 1)
        with pytest.raises(dex.WorkerInvocationError, match="session_codec_registry"):
            await harness.client.invoke_rpc(
                flow.update_session_settings,
                sid,
                UpdateSessionSettingsInput(session_settings={"model": "small"}),
            )
        assert await sessions.update_session_settings(sid, {})

        await sessions.start_session(other, "hi", session_settings={"model": "large"})
        result = await harness.client.wait_for_flow(other, timedelta(seconds=60))
        assert result.status is dex.FlowStatus.FAILED
        assert result.error_message == SESSION_SETTINGS_NEED_SESSION_CODECS
