"""ScriptedModelClient: replies from a function of the request."""

from __future__ import annotations

import json

import pytest

from dex_agents.models import (
    DiscardingStreamSink,
    ModelOutputItem,
    ModelRequest,
    ModelToolCall,
    RecordingStreamSink,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolResultItem,
    UserTextItem,
)


def request(*items: object) -> ModelRequest:
    return ModelRequest(instructions="", items=tuple(items))  # type: ignore[arg-type]


def test_the_scripted_model_has_one_public_import_path() -> None:
    import dex_agents.stepwise
    import dex_agents.testing

    assert ScriptedModelClient.__module__ == "dex_agents.models._scripted"
    assert dex_agents.testing.ScriptedModelClient is ScriptedModelClient  # the contract's export
    assert not hasattr(dex_agents.stepwise, "ScriptedModelClient")


def test_user_texts_and_the_unanswered_tool_results() -> None:
    earlier = ModelOutputItem("scripted", "scripted", {}, "", (ModelToolCall("c1", "a", "{}"),))
    later = ModelOutputItem("scripted", "scripted", {}, "", (ModelToolCall("c2", "b", "{}"),))
    req = request(
        UserTextItem("one"),
        earlier,
        ToolResultItem("c1", "a", "first"),
        later,
        ToolResultItem("c2", "b", "second"),
    )
    assert ScriptedModelClient.user_texts(req) == ["one"]
    assert [r.output for r in ScriptedModelClient.tool_results(req)] == ["second"]
    assert ScriptedModelClient.tool_results(request(UserTextItem("x"))) == []


async def test_async_script_text_reasoning_tool_calls_and_stable_ids() -> None:
    async def script(req: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(
            text="hello world",
            reasoning="thinking",
            tool_calls=[
                ScriptedToolCall("a", {"x": 1}),
                ScriptedToolCall("b", '{"y":2}', call_id="mine"),
            ],
        )

    client = ScriptedModelClient(script, stream_chunk_size=4)
    sink = RecordingStreamSink()
    response = await client.generate(request(UserTextItem("hi")), sink)
    assert sink.text == ["hell", "o wo", "rld"]
    assert sink.reasoning == ["thinking"]
    assert response.output.tool_calls == (
        ModelToolCall("call_1_1", "a", '{"x":1}'),
        ModelToolCall("mine", "b", '{"y":2}'),
    )
    assert response.usage.model_calls == 1
    again = await client.generate(request(UserTextItem("hi")), DiscardingStreamSink())
    assert again == response


async def test_a_string_reply_and_the_latest_requests_are_kept() -> None:
    client = ScriptedModelClient(
        lambda req: f"echo {ScriptedModelClient.user_texts(req)[-1]}", max_recorded_requests=3
    )
    for number in range(5):
        response = await client.generate(request(UserTextItem(str(number))), DiscardingStreamSink())
        assert response.output.text == f"echo {number}"
    assert [ScriptedModelClient.user_texts(r) for r in client.requests] == [["2"], ["3"], ["4"]]
    assert ScriptedModelClient(lambda req: "").requests.maxlen == 100


async def test_a_script_returning_something_else_fails() -> None:
    client = ScriptedModelClient(lambda req: 42)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="ScriptedModelReply"):
        await client.generate(request(UserTextItem("x")), DiscardingStreamSink())


def test_bad_client_arguments_are_refused_by_name() -> None:
    import anthropic
    import openai

    from dex_agents.models import AnthropicModelClient, OpenAIResponsesModelClient

    with pytest.raises(TypeError, match="script must be a function"):
        ScriptedModelClient("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_recorded_requests"):
        ScriptedModelClient(lambda request: "x", max_recorded_requests=-1)
    with pytest.raises(ValueError, match="stream_chunk_size"):
        ScriptedModelClient(lambda request: "x", stream_chunk_size=0)

    with pytest.raises(ValueError, match="model must be a non-empty model name"):
        OpenAIResponsesModelClient(" ", client=openai.AsyncOpenAI(api_key="k"))
    with pytest.raises(TypeError, match=r"client must be an openai\.AsyncOpenAI"):
        OpenAIResponsesModelClient("gpt-5-mini", client=anthropic.AsyncAnthropic(api_key="k"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="include_encrypted_reasoning"):
        OpenAIResponsesModelClient(
            "gpt-5-mini",
            client=openai.AsyncOpenAI(api_key="k"),
            include_encrypted_reasoning="yes",  # type: ignore[arg-type]
        )

    with pytest.raises(ValueError, match="max_output_tokens"):
        AnthropicModelClient(
            "claude", client=anthropic.AsyncAnthropic(api_key="k"), max_output_tokens="8"
        )  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"client must be an anthropic\.AsyncAnthropic"):
        AnthropicModelClient("claude", client=openai.AsyncOpenAI(api_key="k"))  # type: ignore[arg-type]


async def test_input_tokens_count_each_items_json_once_four_characters_a_token() -> None:
    client = ScriptedModelClient(lambda request: ScriptedModelReply(text="four"))
    items = (
        UserTextItem('say "hi" — é'),
        ModelOutputItem("scripted", "scripted", [{"a": 1}], "x", (ModelToolCall("c", "t", "{}"),)),
        ToolResultItem("c", "t", "out"),
    )
    characters = sum(len(json.dumps(item.to_json())) for item in items) + len("rules")
    response = await client.generate(
        ModelRequest(instructions="rules", items=items), DiscardingStreamSink()
    )
    assert response.usage.input_tokens == characters // 4
    empty = await client.generate(ModelRequest(instructions="", items=()), DiscardingStreamSink())
    assert empty.usage.input_tokens == 1
