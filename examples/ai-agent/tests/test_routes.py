"""Every route over real HTTP, on the real engine, with the mock/dex model."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import dex
import httpx
import pytest
from app_server import GROQ_SECRET, SECRET, RunningApp

from dex_agents.runner import TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
from dex_agents.testing import poll_until

API = "/products/ai-agent"
Snapshot = dict[str, Any]


@pytest.fixture
async def http(running_app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=running_app.base_url, timeout=30, headers=running_app.csrf_headers
    ) as client:
        yield client


ALL_SERVERS = ["google_docs", "search", "slack"]
ALL_TOOLS = [
    "google_docs__create_document",
    "google_docs__search_documents",
    "search__web_search",
    "slack__post_message",
    "slack__search_messages",
]


async def start(http: httpx.AsyncClient, **fields: Any) -> str:
    """Start an Agent with every demo server and tool unless ``fields`` say otherwise."""
    workflow_id = str(uuid.uuid4())
    body = {"enabledMcpServers": ALL_SERVERS, "enabledTools": ALL_TOOLS, **fields}
    response = await http.post(f"{API}/start", json={"workflowId": workflow_id, **body})
    assert response.status_code == 200, response.text
    assert response.json() == {"workflow_id": workflow_id}
    return workflow_id


async def snapshot(http: httpx.AsyncClient, workflow_id: str) -> Snapshot:
    response = await http.get(f"{API}/snapshot", params={"workflowId": workflow_id})
    assert response.status_code == 200, response.text
    return response.json()


async def wait_for(
    http: httpx.AsyncClient, workflow_id: str, condition: Callable[[Snapshot], bool], what: str
) -> Snapshot:
    async def probe() -> Snapshot | None:
        value = await snapshot(http, workflow_id)
        return value if condition(value) else None

    return await poll_until(probe, description=what, within=timedelta(seconds=60))


async def started(http: httpx.AsyncClient, workflow_id: str) -> Snapshot:
    """The snapshot once the session's first Step stored its state and settings.

    ``/start`` answers when the Flow is started; its first Step may not have run yet.
    """
    return await wait_for(
        http,
        workflow_id,
        lambda v: v["agent_status"] != "initializing" and bool(v.get("session_settings")),
        "the session's first Step",
    )


def idle(value: Snapshot) -> bool:
    return value["agent_status"] == "waiting_for_user_message" and not value["queued_messages"]


def texts(value: Snapshot, role: str) -> list[str]:
    return [m["text"] for m in value["messages"] if m["role"] == role and m["text"]]


def tool_outputs(value: Snapshot) -> list[str]:
    return [m["tool_output"] or m["text"] for m in value["messages"] if m["role"] == "tool"]


async def send(http: httpx.AsyncClient, workflow_id: str, content: str, plan_mode: bool = False):
    body = {"workflowId": workflow_id, "content": content, "planMode": plan_mode}
    response = await http.post(f"{API}/messages", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": True}


async def test_portal_lists_providers_servers_and_tools_without_secrets(
    http: httpx.AsyncClient,
) -> None:
    response = await http.get(f"{API}/portal")
    assert response.status_code == 200
    assert SECRET not in response.text
    portal = response.json()
    providers = {p["id"]: p for p in portal["providers"]}
    assert list(providers) == ["mock", "openai", "anthropic", "gemini", "groq", "custom"]
    assert providers["mock"]["isConfigured"] is True
    assert providers["openai"]["isConfigured"] is True  # the key is in the app's environment
    assert providers["anthropic"]["isConfigured"] is False
    assert providers["groq"]["isConfigured"] is True
    assert providers["gemini"]["isConfigured"] is False
    assert providers["custom"]["environmentVariable"] == "DEX_AGENT_CUSTOM_BASE_URL"
    assert providers["custom"]["isConfigured"] is True
    assert GROQ_SECRET not in response.text
    assert portal["mcpServers"] == ["google_docs", "search", "slack"]
    approval = {t["name"] for t in portal["tools"] if t["requiresApproval"]}
    assert approval == {"slack__post_message", "google_docs__create_document"}
    assert portal["builtInTools"] == ["write_todos", "ask_user", "durable_wait"]


async def test_the_index_serves_the_bundle(http: httpx.AsyncClient) -> None:
    page = await http.get(f"{API}/")
    assert page.status_code == 200
    assert '<div id="root">' in page.text
    assert (await http.get(f"{API}/assets/app.js")).status_code == 200


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"provider": "nope"}, "unknown provider"),
        ({"provider": "anthropic", "model": "claude-sonnet-4-5"}, "anthropic is not configured"),
        ({"provider": "openai", "model": "  "}, "model must not be blank"),
        ({"provider": "openai", "model": "anthropic/x"}, "must start with openai/"),
        ({"provider": "groq", "model": "openai/gpt-oss-20b"}, "must start with groq/"),
        ({"provider": "gemini", "model": "gemini-2.5-flash"}, "set GEMINI_API_KEY"),
        ({"provider": "custom", "model": ""}, "model must not be blank"),
        ({"systemPrompt": "  "}, "systemPrompt must not be blank"),
        ({"maxContextTokens": "many"}, "maxContextTokens"),
        ({"maxContextTokens": 10}, "maxContextTokens"),
        ({"mcpEnabled": "yes"}, "mcpEnabled"),
        ({"enabledMcpServers": []}, "Select at least one MCP server"),
        ({"enabledMcpServers": ["search"], "enabledTools": []}, "Select at least one available"),
        ({"enabledMcpServers": ["mystery"]}, "unknown MCP server"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_start_refuses_bad_requests_with_a_clear_400(
    http: httpx.AsyncClient, fields: dict[str, Any], message: str
) -> None:
    body = {"workflowId": str(uuid.uuid4()), **fields}
    response = await http.post(f"{API}/start", json=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    assert "Traceback" not in response.text


async def test_start_adds_the_prefix_and_refuses_a_duplicate_id(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http, provider="openai", model="gpt-5-mini", mcpEnabled=False)
    value = await started(http, workflow_id)
    assert value["session_settings"]["model"] == "openai/gpt-5-mini"
    assert value["session_settings"]["enabled_tools"] == []
    assert SECRET not in json.dumps(value)
    again = await http.post(f"{API}/start", json={"workflowId": workflow_id, "mcpEnabled": False})
    assert again.status_code == 409


@pytest.mark.parametrize(
    ("provider", "model", "stored"),
    [
        ("groq", "llama-3.3-70b-versatile", "groq/llama-3.3-70b-versatile"),
        ("groq", "groq/openai/gpt-oss-20b", "groq/openai/gpt-oss-20b"),
        ("custom", "meta-llama/Llama-3.1-8B", "custom/meta-llama/Llama-3.1-8B"),
        ("custom", "custom/qwen3", "custom/qwen3"),
    ],
)
async def test_chat_completions_providers_start_with_their_model_names(
    http: httpx.AsyncClient, provider: str, model: str, stored: str
) -> None:
    workflow_id = await start(http, provider=provider, model=model, mcpEnabled=False)
    value = await started(http, workflow_id)
    assert value["session_settings"]["provider"] == provider
    assert value["session_settings"]["model"] == stored
    assert GROQ_SECRET not in json.dumps(value)


@pytest.mark.parametrize(
    "path",
    [
        "/start",
        "/messages",
        "/message-queue/delete",
        "/message-queue/steer",
        "/plans/execute",
        "/tool-approvals",
        "/user-input",
        "/turns/cancel",
    ],
)
@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'{"workflowId": 5}'])
async def test_every_mutation_answers_a_bad_body_with_400(
    http: httpx.AsyncClient, path: str, body: bytes
) -> None:
    response = await http.post(f"{API}{path}", content=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("invalid request body")


async def test_reads_need_a_known_workflow_id(http: httpx.AsyncClient) -> None:
    assert (await http.get(f"{API}/snapshot")).status_code == 400
    assert (await http.get(f"{API}/events")).status_code == 400
    missing = await http.get(f"{API}/snapshot", params={"workflowId": "no-such-agent"})
    assert missing.status_code == 404


async def test_a_message_is_answered_by_the_mock_model(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    value = await started(http, workflow_id)
    assert value["agent_status"] == "waiting_for_user_message"
    assert value["session_settings"]["model"] == "mock/dex"
    await send(http, workflow_id, "hello")
    value = await wait_for(http, workflow_id, lambda v: len(texts(v, "assistant")) == 1, "reply")
    assert texts(value, "user") == ["hello"]
    assert texts(value, "assistant") == ["Local demo response: hello"]


async def test_an_approval_runs_or_rejects_the_write(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    post = '/tool slack__post_message {"channel":"#general","message":"hi"}'
    await send(http, workflow_id, post)
    value = await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_tool_approval", "approval"
    )
    (interrupt,) = value["pending_interrupts"]
    stale = {"workflowId": workflow_id, "callId": "not-pending", "approved": True}
    assert (await http.post(f"{API}/tool-approvals", json=stale)).json() == {"accepted": False}
    decision = {"workflowId": workflow_id, "callId": interrupt["interrupt_id"], "approved": True}
    assert (await http.post(f"{API}/tool-approvals", json=decision)).json() == {"accepted": True}
    value = await wait_for(http, workflow_id, idle, "approved write")
    assert tool_outputs(value) == ["Demo Slack message posted to #general: hi"]
    assert texts(value, "assistant")[-1].startswith("The tool finished with this result: Demo")

    await send(http, workflow_id, post)
    value = await wait_for(http, workflow_id, lambda v: bool(v["pending_interrupts"]), "2nd")
    decision = {
        "workflowId": workflow_id,
        "callId": value["pending_interrupts"][0]["interrupt_id"],
        "approved": False,
    }
    assert (await http.post(f"{API}/tool-approvals", json=decision)).json() == {"accepted": True}
    value = await wait_for(http, workflow_id, lambda v: len(tool_outputs(v)) == 2, "rejection")
    assert "Demo Slack" not in tool_outputs(value)[1]


async def test_a_read_tool_runs_without_approval_and_disabled_tools_are_refused(
    http: httpx.AsyncClient,
) -> None:
    workflow_id = await start(
        http, enabledMcpServers=["search"], enabledTools=["search__web_search"]
    )
    await send(http, workflow_id, '/tool search__web_search {"query":"dex"}')
    value = await wait_for(http, workflow_id, lambda v: len(texts(v, "assistant")) >= 1, "read")
    assert tool_outputs(value)[0].startswith("Demo search results for 'dex'")
    await send(http, workflow_id, '/tool slack__post_message {"channel":"#x","message":"y"}')
    value = await wait_for(http, workflow_id, lambda v: len(texts(v, "assistant")) >= 2, "refusal")
    assert "unknown_or_disabled_tool" in texts(value, "assistant")[-1]


async def test_queue_edit_delete_and_steer_during_a_durable_wait(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "/wait 300 check tickets")
    await wait_for(http, workflow_id, lambda v: v["agent_status"] == "waiting_for_timer", "timer")
    await send(http, workflow_id, "replace the objective")
    await send(http, workflow_id, "never mind")
    value = await wait_for(http, workflow_id, lambda v: len(v["queued_messages"]) == 2, "queue")
    first, second = value["queued_messages"]
    assert [first["text"], second["text"]] == ["replace the objective", "never mind"]
    assert value["agent_status"] == "waiting_for_timer"  # queued messages do not interrupt

    delete = {"workflowId": workflow_id, "messageId": second["message_id"]}
    assert (await http.post(f"{API}/message-queue/delete", json=delete)).status_code == 200
    stale = await http.post(f"{API}/message-queue/delete", json=delete)
    assert stale.status_code == 404
    assert stale.json()["error"] == "the queued message is no longer pending"

    steer = {"workflowId": workflow_id, "messageId": first["message_id"]}
    assert (await http.post(f"{API}/message-queue/steer", json=steer)).status_code == 200
    value = await wait_for(
        http,
        workflow_id,
        lambda v: idle(v) and "Local demo response: replace the objective" in texts(v, "assistant"),
        "steered turn",
    )
    assert (await http.post(f"{API}/message-queue/steer", json=steer)).status_code == 404
    assert "never mind" not in texts(value, "user")
    assert texts(value, "user")[-1] == "replace the objective"


async def test_cancel_turn_stops_a_durable_wait(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "/wait 300 long")
    await wait_for(http, workflow_id, lambda v: v["agent_status"] == "waiting_for_timer", "timer")
    cancel = await http.post(f"{API}/turns/cancel", json={"workflowId": workflow_id})
    assert cancel.json() == {"accepted": True}
    value = await wait_for(http, workflow_id, idle, "cancelled turn")
    assert value["state"]["active_turn_id"] is None
    again = await http.post(f"{API}/turns/cancel", json={"workflowId": workflow_id})
    assert again.json() == {"accepted": False}


async def test_a_short_wait_completes(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "/wait 1 short")
    value = await wait_for(http, workflow_id, lambda v: len(tool_outputs(v)) == 1, "timer")
    assert json.loads(tool_outputs(value)[0])["status"] == "completed"


async def test_plan_mode_drafts_executes_and_refuses_stale_revisions(
    http: httpx.AsyncClient,
) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "Research Dex", plan_mode=True)
    value = await wait_for(http, workflow_id, lambda v: idle(v) and v["plan"], "draft")
    plan = value["plan"]
    assert (plan["revision"], plan["status"]) == (1, "draft")
    assert [t["status"] for t in plan["tasks"]] == ["pending", "pending"]
    assert texts(value, "assistant")[-1] == "The plan is ready for review."

    execute = {"workflowId": workflow_id, "revision": 99}
    refused = await http.post(f"{API}/plans/execute", json=execute)
    assert refused.status_code == 409
    execute["revision"] = 1
    assert (await http.post(f"{API}/plans/execute", json=execute)).status_code == 200
    value = await wait_for(
        http, workflow_id, lambda v: idle(v) and v["plan"]["status"] == "completed", "executed"
    )
    assert [t["status"] for t in value["plan"]["tasks"]] == ["completed", "completed"]
    assert texts(value, "assistant")[-1] == "I completed the approved plan."
    execute["revision"] = value["plan"]["revision"]
    assert (await http.post(f"{API}/plans/execute", json=execute)).status_code == 409


async def draft_and_execute(http: httpx.AsyncClient, workflow_id: str, objective: str) -> None:
    """A Plan-mode message drafts a plan; its revision is then executed."""
    await send(http, workflow_id, objective, plan_mode=True)
    value = await wait_for(http, workflow_id, lambda v: idle(v) and v["plan"], "draft")
    execute = {"workflowId": workflow_id, "revision": value["plan"]["revision"]}
    assert (await http.post(f"{API}/plans/execute", json=execute)).status_code == 200


async def test_a_message_after_a_stopped_plan_is_handled_in_planning_mode(
    http: httpx.AsyncClient,
) -> None:
    workflow_id = await start(http)
    await draft_and_execute(http, workflow_id, "/plan-stop demo")
    stopped = "I stopped before completing every plan task."
    value = await wait_for(
        http, workflow_id, lambda v: idle(v) and texts(v, "assistant")[-1] == stopped, "stop"
    )
    assert value["plan"]["status"] == "active"
    # Sent without Plan mode, yet planned: the tool is refused and the plan is unchanged.
    await send(http, workflow_id, '/tool search__web_search {"query":"x"}')
    value = await wait_for(
        http, workflow_id, lambda v: idle(v) and texts(v, "assistant")[-1] != stopped, "reply"
    )
    assert json.loads(texts(value, "assistant")[-1])["error"] == "unknown_or_disabled_tool"
    assert not any("Demo search results" in output for output in tool_outputs(value))
    assert value["plan"]["status"] == "active"
    execute = {"workflowId": workflow_id, "revision": value["plan"]["revision"]}
    assert (await http.post(f"{API}/plans/execute", json=execute)).status_code == 200
    value = await wait_for(
        http, workflow_id, lambda v: idle(v) and v["plan"]["status"] == "completed", "plan done"
    )
    assert texts(value, "assistant")[-1] == "I completed the approved plan."


async def test_an_executing_plan_asks_and_the_answer_resumes_it(
    http: httpx.AsyncClient,
) -> None:
    workflow_id = await start(http)
    await draft_and_execute(http, workflow_id, "/ask What date should I use?")
    value = await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_input", "question"
    )
    (question,) = value["pending_interrupts"]
    assert question["question"] == "What date should I use?"
    assert value["plan"]["status"] == "active"
    answer = {"workflowId": workflow_id, "callId": question["interrupt_id"], "answer": "Friday"}
    assert (await http.post(f"{API}/user-input", json=answer)).status_code == 200
    value = await wait_for(
        http, workflow_id, lambda v: idle(v) and v["plan"]["status"] == "completed", "plan done"
    )
    assert texts(value, "assistant")[-1] == "I completed the approved plan."


async def test_a_steer_supersedes_a_pending_approval(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, '/tool slack__post_message {"channel":"#a","message":"b"}')
    await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_tool_approval", "approval"
    )
    await send(http, workflow_id, "do something else")
    value = await wait_for(http, workflow_id, lambda v: bool(v["queued_messages"]), "queued")
    steer = {"workflowId": workflow_id, "messageId": value["queued_messages"][0]["message_id"]}
    assert (await http.post(f"{API}/message-queue/steer", json=steer)).status_code == 200
    value = await wait_for(
        http,
        workflow_id,
        lambda v: idle(v) and "Local demo response: do something else" in texts(v, "assistant"),
        "steered turn",
    )
    assert value["pending_interrupts"] == []
    assert not any("Demo Slack message posted" in output for output in tool_outputs(value))


async def test_a_question_is_answered_from_the_input_panel(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "/choose Pick a color | Red | Blue")
    value = await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_input", "question"
    )
    (question,) = value["pending_interrupts"]
    assert (question["question"], question["choices"]) == ("Pick a color", ["Red", "Blue"])
    wrong = {"workflowId": workflow_id, "callId": question["interrupt_id"], "answer": "Green"}
    assert (await http.post(f"{API}/user-input", json=wrong)).status_code == 409
    answer = {**wrong, "answer": "Red"}
    assert (await http.post(f"{API}/user-input", json=answer)).status_code == 200
    value = await wait_for(http, workflow_id, idle, "answered")
    assert json.loads(tool_outputs(value)[0]) == {"status": "answered", "answer": "Red"}


async def test_ask_many_asks_once_and_does_not_run_the_wait(http: httpx.AsyncClient) -> None:
    # Check 29: the durable_wait after the question in the same reply is not run.
    workflow_id = await start(http)
    await send(http, workflow_id, "/ask-many x")
    value = await wait_for(
        http, workflow_id, lambda v: v["agent_status"] == "waiting_for_input", "question"
    )
    (question,) = value["pending_interrupts"]
    assert question["question"] == "x"
    (wait,) = [c for c in value["tool_calls"] if c["tool_name"] == "durable_wait"]
    assert (wait["status"], wait["cancellation_reason"]) == ("rejected", "superseded_by_user_input")
    assert not any(c["status"] == "waiting_for_timer" for c in value["tool_calls"])
    answer = {"workflowId": workflow_id, "callId": question["interrupt_id"], "answer": "Friday"}
    assert (await http.post(f"{API}/user-input", json=answer)).status_code == 200
    value = await wait_for(http, workflow_id, idle, "answered")  # waits for a message, no timer
    asked, waited = tool_outputs(value)
    assert json.loads(asked) == {"status": "answered", "answer": "Friday"}
    assert waited == TOOL_CALL_SUPERSEDED_BY_QUESTION_RESULT
    assert texts(value, "assistant")[-1].startswith("The tool finished with this result:")


async def test_a_small_context_window_compacts(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http, maxContextTokens=200)
    for number in range(4):
        await send(http, workflow_id, f"message {number}: " + "long text " * 40)
        await wait_for(http, workflow_id, idle, "turn")
    value = await wait_for(http, workflow_id, lambda v: v["context_summary"] is not None, "summary")
    assert value["context_summary"]["last_sequence"] > 0


async def test_events_stream_as_server_sent_events(http: httpx.AsyncClient) -> None:
    workflow_id = await start(http)
    await send(http, workflow_id, "hello events")
    await wait_for(http, workflow_id, idle, "turn")
    params = {"workflowId": workflow_id, "resumeToken": ""}
    types: list[str] = []
    async with http.stream("GET", f"{API}/events", params=params) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                types.append(json.loads(line[6:])["type"])
            if "turn_completed" in types:
                break
    assert types[0] == "turn_started"
    assert "text_delta" in types
    rejected = await http.get(f"{API}/events", params={**params, "resumeToken": "bogus"})
    assert rejected.status_code == 400


async def test_a_stopped_flow_reports_its_lifecycle(
    http: httpx.AsyncClient, running_app: RunningApp
) -> None:
    workflow_id = await start(http)
    options = dex.StopFlowOptions(type=dex.StopType.TERMINATE, reason="stopped by test")
    running_app.call(running_app.host.dex_client.stop_flow(workflow_id, options))
    value = await wait_for(http, workflow_id, lambda v: v["flow"]["status"] != "running", "stop")
    assert value["flow"] == {"status": "terminated", "error": "stopped by test"}
    refused = await http.post(f"{API}/messages", json={"workflowId": workflow_id, "content": "x"})
    assert refused.status_code in (404, 409)
