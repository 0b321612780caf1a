"""What keeps other sites out and what the limits are, over real HTTP: the Host
allowlist, same origin and CSRF, sign-in, the body limit, message limits in UTF-8
bytes, ID checks, security headers. (The browser tests from a second origin are in
``test_browser_trust.py``.)"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from app_server import RunningApp
from test_routes import API, send, started, texts, wait_for

from dex_agents_ai_agent.main import StartError, parse_arguments, trust_settings
from dex_agents_ai_agent.security import TrustSettings

TOKEN = "correct-horse-battery-staple"


@pytest.fixture
async def http(running_app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=running_app.base_url, timeout=60, headers=running_app.csrf_headers
    ) as client:
        yield client


async def new_agent(http: httpx.AsyncClient) -> str:
    workflow_id = str(uuid.uuid4())
    response = await http.post(
        f"{API}/start", json={"workflowId": workflow_id, "mcpEnabled": False}
    )
    assert response.status_code == 200, response.text
    return workflow_id


@pytest.mark.parametrize("mebibytes", [5, 20])
async def test_a_body_over_the_limit_gets_413_naming_it(
    http: httpx.AsyncClient, mebibytes: int
) -> None:
    content = "x" * (mebibytes * 1024 * 1024)
    body = {"workflowId": "any-agent", "content": content}
    response = await http.post(f"{API}/messages", json=body)
    assert response.status_code == 413
    assert response.json()["error"] == (
        "the request body is larger than the limit of 4,194,304 bytes (4 MiB)"
    )


async def test_a_message_over_the_limit_gets_413_naming_it(http: httpx.AsyncClient) -> None:
    workflow_id = await new_agent(http)
    body = {"workflowId": workflow_id, "content": "x" * (1024 * 1024)}
    response = await http.post(f"{API}/messages", json=body)
    assert response.status_code == 413
    assert response.json()["error"] == (
        "the message is 1.0 MiB (1,048,576 bytes) of UTF-8 text; "
        "the limit is 512 KiB (524,288 bytes)"
    )
    stored = {"workflowId": workflow_id, "content": "字" * 140_000}  # 420 KB, 840 KB stored
    response = await http.post(f"{API}/messages", json=stored)
    assert response.status_code == 413
    assert "when stored" in response.json()["error"]


async def test_300_kb_of_cjk_text_is_accepted(http: httpx.AsyncClient) -> None:
    workflow_id = await new_agent(http)
    await started(http, workflow_id)
    text = "字" * 100_000  # 300,000 bytes of UTF-8; 600,000 as escaped JSON
    await send(http, workflow_id, text)
    value = await wait_for(http, workflow_id, lambda v: bool(texts(v, "user")), "stored")
    assert texts(value, "user") == [text]
    snapshot = (await http.get(f"{API}/snapshot", params={"workflowId": workflow_id})).json()
    assert snapshot["limits"] == {
        "messageBytes": 524_288,
        "storedMessageBytes": 786_432,
        "bodyBytes": 4_194_304,
    }


@pytest.mark.parametrize("bad_id", [" ", "a\nb", "../etc", "a/b", "x" * 129, "-x", "a..b"])
async def test_bad_ids_get_400_never_500(http: httpx.AsyncClient, bad_id: str) -> None:
    start = await http.post(f"{API}/start", json={"workflowId": bad_id, "mcpEnabled": False})
    assert start.status_code == 400, start.text
    assert "workflowId" in start.json()["error"]
    message = await http.post(f"{API}/messages", json={"workflowId": bad_id, "content": "x"})
    assert message.status_code == 400
    for path in ("/snapshot", "/events"):
        read = await http.get(f"{API}{path}", params={"workflowId": bad_id})
        assert read.status_code == 400, (path, read.text)


async def test_bad_message_and_call_ids_get_400(http: httpx.AsyncClient) -> None:
    workflow_id = await new_agent(http)
    for path, field in (("/message-queue/delete", "messageId"), ("/user-input", "callId")):
        body = {"workflowId": workflow_id, field: "a/../b\n", "answer": "x"}
        if path != "/user-input":
            body.pop("answer")
        response = await http.post(f"{API}{path}", json=body)
        assert response.status_code == 400, response.text


async def test_the_events_of_an_unknown_agent_are_a_404(http: httpx.AsyncClient) -> None:
    response = await http.get(f"{API}/events", params={"workflowId": "no-such-agent"})
    assert response.status_code == 404
    assert response.json() == {"error": "no such Agent"}


async def test_the_conversation_list_is_newest_first_with_titles(
    http: httpx.AsyncClient,
) -> None:
    older = await new_agent(http)
    await send(http, older, "the older conversation")
    newer = await new_agent(http)
    await started(http, newer)
    await wait_for(http, older, lambda v: bool(texts(v, "user")), "stored")
    sessions = (await http.get(f"{API}/sessions")).json()["sessions"]
    ids = [session["workflowId"] for session in sessions]
    assert ids.index(newer) < ids.index(older)
    by_id = {session["workflowId"]: session for session in sessions}
    assert by_id[older]["title"] == "the older conversation"
    assert by_id[newer]["title"] is None  # no message yet
    assert by_id[newer]["status"] == "running"


async def test_cross_origin_and_tokenless_mutations_are_refused(
    running_app: RunningApp,
) -> None:
    body = {"workflowId": str(uuid.uuid4()), "mcpEnabled": False}
    other = running_app.base_url.replace("127.0.0.1", "localhost")
    cases: list[tuple[dict[str, str], str]] = [
        ({"origin": "http://evil.example"}, "cross_origin"),
        ({"origin": "null"}, "cross_origin"),
        ({"origin": other}, "cross_origin"),  # another origin of this same machine
        ({"sec-fetch-site": "same-site"}, "cross_origin"),
        ({"sec-fetch-site": "cross-site"}, "cross_origin"),
        ({}, "csrf"),  # no CSRF token
        ({"x-csrf-token": "guessed"}, "csrf"),
    ]
    async with httpx.AsyncClient(base_url=running_app.base_url, timeout=30) as client:
        for headers, code in cases:
            if code == "cross_origin":
                headers = {**running_app.csrf_headers, **headers}
            response = await client.post(f"{API}/start", json=body, headers=headers)
            assert response.status_code == 403, (headers, response.text)
            assert response.json()["code"] == code
        read = await client.get(f"{API}/portal", headers={"sec-fetch-site": "cross-site"})
        assert read.status_code == 403
        same = {**running_app.csrf_headers, "origin": running_app.base_url}
        accepted = await client.post(f"{API}/start", json=body, headers=same)
        assert accepted.status_code == 200, accepted.text


async def test_an_unknown_host_is_refused(running_app: RunningApp) -> None:
    async with httpx.AsyncClient(base_url=running_app.base_url, timeout=30) as client:
        for path in ("/", "/portal", "/assets/app.js"):
            response = await client.get(f"{API}{path}", headers={"host": "rebind.example:80"})
            assert response.status_code == 400
            assert "Host 'rebind.example:80' is not allowed" in response.text
        assert (await client.get(f"{API}/portal", headers={"host": "localhost"})).status_code == 200


async def test_every_response_carries_the_security_headers(http: httpx.AsyncClient) -> None:
    for path in ("/", "/portal", "/assets/app.js", "/snapshot?workflowId=none"):
        response = await http.get(f"{API}{path}")
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
    page = await http.get(f"{API}/")
    assert '<meta name="dex-csrf-token"' in page.text
    assert "<script>" not in page.text  # no inline script


@pytest.fixture(scope="module")
def signed_app() -> Iterator[RunningApp]:
    app = RunningApp(trust=TrustSettings(access_token=TOKEN))
    app.start()
    yield app
    app.stop()


async def test_sign_in_guards_every_route(signed_app: RunningApp) -> None:
    async with httpx.AsyncClient(base_url=signed_app.base_url, timeout=30) as client:
        assert (await client.get(f"{API}/portal")).status_code == 401
        page = await client.get(f"{API}/")
        assert page.status_code == 303
        assert page.headers["location"] == f"{API}/sign-in"
        form = await client.get(f"{API}/sign-in")
        assert form.status_code == 200
        assert 'name="token"' in form.text
        csrf = signed_app.trust.csrf_token
        wrong = await client.post(f"{API}/sign-in", data={"token": "nope", "csrf": csrf})
        assert wrong.status_code == 401
        assert "That token is not right." in wrong.text
        right = await client.post(f"{API}/sign-in", data={"token": TOKEN, "csrf": csrf})
        assert right.status_code == 303
        assert "HttpOnly" in right.headers["set-cookie"]
        assert "SameSite=Strict" in right.headers["set-cookie"]
        assert (await client.get(f"{API}/portal")).status_code == 200  # the cookie
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=signed_app.base_url, timeout=30) as client:
        assert (await client.get(f"{API}/portal", headers=bearer)).status_code == 200
        body = {"workflowId": str(uuid.uuid4()), "mcpEnabled": False}
        started = await client.post(f"{API}/start", json=body, headers=bearer)
        assert started.status_code == 200  # a bearer token needs no CSRF token


def _trust(argv: list[str], environ: dict[str, str] | None = None) -> TrustSettings:
    arguments: argparse.Namespace = parse_arguments(argv)
    return trust_settings(arguments, environ or {})


def test_the_command_refuses_an_open_bind_without_a_token() -> None:
    assert _trust([]).allowed_hosts == {"127.0.0.1", "localhost", "::1"}
    assert _trust(["--allowed-host", "agent.test"]).allowed_hosts >= {"agent.test"}
    with pytest.raises(StartError, match="DEX_AGENT_ACCESS_TOKEN"):
        _trust(["--host", "192.0.2.7"])
    with pytest.raises(StartError, match="--allowed-host"):
        _trust(["--host", "0.0.0.0"], {"DEX_AGENT_ACCESS_TOKEN": TOKEN})
    with pytest.raises(StartError, match="at least 16"):
        _trust([], {"DEX_AGENT_ACCESS_TOKEN": "short"})
    shared = _trust(
        ["--host", "0.0.0.0", "--allowed-host", "agent.test"], {"DEX_AGENT_ACCESS_TOKEN": TOKEN}
    )
    assert shared.allowed_hosts == {"agent.test"}
    assert shared.access_token == TOKEN
