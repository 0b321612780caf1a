"""``ClaudeRunner``: Claude through the ``anthropic`` SDK as an ``AgentFrameworkRunner``.

Each ``run_model_step`` makes one streamed ``messages`` request built from the
stored messages only, writes text and thinking deltas as events, and defers
every ``tool_use`` block. The turn's messages are stored as it goes
(``ToolCallsRequested.new_messages``), so the run state only counts the turn's
model calls. The SDK client is built in each Worker process from a factory
(never serialized) and makes no retries of its own: a failed request is a
new ``RunModel`` attempt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

import anthropic
from anthropic.types import Message, Usage

from dex_agents import AgentUsage
from dex_agents.runner import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    WRITE_TODOS,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskForwarding,
    build_plan_note,
    check_model_tool_call_id,
    check_planning_tool_choice,
    context_summary_note,
    counted_model_step_outcome,
    decode_model_call_count,
    enabled_builtin_tool_definitions,
    forced_tool_choice_refusal,
    known_tool,
    model_call_metadata,
    returning_started_task,
    serving_model_step,
    single_response_usage,
    thinking_enabled,
    tool_arguments_object,
)
from dex_agents.values import FrameworkMessage, InteractionMode
from dex_agents_claude_sdk._compaction import (
    compaction_cutoff,
    counted_request,
    estimate_request_tokens,
    summary_text,
)
from dex_agents_claude_sdk._messages import (
    ToolUse,
    assistant_messages,
    decode_item,
    request_messages,
    stored_items,
    tool_result_message,
    tool_uses_of,
    unanswered_tool_uses,
    user_message,
)
from dex_agents_claude_sdk._tools import ClaudeTool, ToolLike, as_claude_tool, policy_of_call

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ClaudeRunner",
    "PlanningToolChoice",
    "ResolveModel",
    "check_forced_tool_choice",
]

logger = logging.getLogger(__name__)

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 4096
_RESERVED_REQUEST_KEYS = frozenset({"model", "messages", "system", "tools", "max_tokens", "stream"})

ClientFactory = Callable[[], anthropic.AsyncAnthropic]

ResolveModel = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a turn's session settings to the Claude model of its requests, or ``None`` for the
runner's own ``model``."""

PlanningToolChoice = Literal["auto", "required"]


def check_forced_tool_choice(model: str, thinking: Mapping[str, Any] | None, *, where: str) -> None:
    """Raise ``ValueError`` when ``planning_tool_choice="required"`` cannot work with
    ``model`` and ``thinking``: the model refuses a forced tool choice, or extended thinking
    is on (``dex_agents.runner.forced_tool_choice_refusal``)."""
    extended = thinking_enabled({"thinking": thinking}) if thinking is not None else False
    check_planning_tool_choice(
        "required", forced_tool_choice_refusal(model, extended_thinking=extended), where=where
    )


def client_from_environment(api_key_env: str) -> ClientFactory:
    """A factory of ``AsyncAnthropic`` clients reading the API key from ``api_key_env``."""

    def build() -> anthropic.AsyncAnthropic:
        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(
                f"environment variable {api_key_env} is not set; the Worker needs the Anthropic"
                " API key there, or pass client_factory="
            )
        return anthropic.AsyncAnthropic(api_key=key, max_retries=0)

    return build


class ClaudeRunner(ToolTaskForwarding):
    """Runs Claude with tools under the session Flow; keeps no session state between calls.

    A planning turn offers only ``write_todos`` (``supports_plan_mode``), and the plan
    note (``build_plan_note``) follows the system prompt in every model call.

    ``client_factory`` builds the ``AsyncAnthropic`` client in each Worker process
    (once per event loop); without it the client reads ``api_key_env``.
    ``thinking`` is the Messages API ``thinking`` parameter, such as
    ``{"type": "enabled", "budget_tokens": 2048}``. ``request_options`` are
    further keyword arguments of ``messages.stream`` (``temperature``,
    ``tool_choice``, ``metadata``, ``extra_headers``, ...).

    ``planning_tool_choice="required"`` forces ``write_todos`` on a planning turn's first
    model call while no draft exists (``tool_choice`` ``{"type": "tool"}``); a model or
    ``thinking`` that refuses a forced tool choice raises ``ValueError`` here.
    ``resolve_model`` maps a turn's session settings to the model of every request of the
    turn (token counts and summary calls included); ``None`` keeps ``model``.
    """

    supports_plan_mode = True

    def __init__(
        self,
        model: str,
        *,
        tools: Sequence[ToolLike] = (),
        system_prompt: str | Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        request_options: Mapping[str, Any] | None = None,
        client_factory: ClientFactory | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        planning_tool_choice: PlanningToolChoice = "auto",
        resolve_model: ResolveModel | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("model must be a non-empty model name")
        if type(max_tokens) is not int or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        _check_optional_type("thinking", thinking, Mapping, "a mapping such as {'type': 'enabled'}")
        _check_optional_type("request_options", request_options, Mapping, "a mapping")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, int | float)  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise TypeError(f"temperature must be a number or None, got {temperature!r}")
        if system_prompt is not None and (
            not isinstance(system_prompt, str | Sequence)  # pyright: ignore[reportUnnecessaryIsInstance]
            or (
                not isinstance(system_prompt, str)
                and not all(isinstance(block, Mapping) for block in system_prompt)  # pyright: ignore[reportUnnecessaryIsInstance]
            )
        ):
            raise TypeError(
                "system_prompt must be a str or a list of text block dicts,"
                f" got {type(system_prompt).__name__}"
            )
        if client_factory is not None and not callable(client_factory):
            raise TypeError("client_factory must be callable (returning anthropic.AsyncAnthropic)")
        if not isinstance(api_key_env, str) or not api_key_env:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("api_key_env must be the name of an environment variable")
        if planning_tool_choice not in ("auto", "required"):
            raise ValueError(
                f"planning_tool_choice must be 'auto' or 'required', got {planning_tool_choice!r}"
            )
        if resolve_model is not None and not callable(resolve_model):
            raise TypeError("resolve_model must be a function of the session settings")
        if planning_tool_choice == "required":
            check_forced_tool_choice(model, thinking, where="ClaudeRunner")
        if isinstance(tools, str | Mapping) or not isinstance(tools, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"tools must be a list of tools, got {type(tools).__name__}; wrap a single"
                " tool in a list"
            )
        extra = dict(request_options or {})
        reserved = sorted(_RESERVED_REQUEST_KEYS & extra.keys())
        if reserved:
            raise ValueError(f"request_options may not set {reserved}; use the runner's arguments")
        by_name: dict[str, ClaudeTool] = {}
        for tool in tools:
            claude = as_claude_tool(tool)
            if claude.name in by_name:
                raise ValueError(f"two tools are named {claude.name!r}")
            by_name[claude.name] = claude
        self.model = model
        self.tools: Mapping[str, ClaudeTool] = by_name
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.temperature = temperature
        self.request_options = extra
        self.planning_tool_choice: PlanningToolChoice = planning_tool_choice
        self.resolve_model = resolve_model
        self._client_factory = client_factory or client_from_environment(api_key_env)
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, anthropic.AsyncAnthropic
        ] = weakref.WeakKeyDictionary()

    def client(self) -> anthropic.AsyncAnthropic:
        """This process's client for the running event loop, without SDK retries."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            built = self._client_factory()
            if not isinstance(built, anthropic.AsyncAnthropic):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    "client_factory must return anthropic.AsyncAnthropic,"
                    f" got {type(built).__name__}"
                )
            client = built.with_options(max_retries=0)
            self._clients[loop] = client
        return client

    def model_for(self, session_settings: Mapping[str, Any]) -> str:
        """The model of a request under ``session_settings``: ``resolve_model``'s choice, else
        ``model``."""
        if self.resolve_model is None:
            return self.model
        model = self.resolve_model(session_settings)
        if model is None:
            return self.model
        if not isinstance(model, str) or not model:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"resolve_model must return a model name or None, got {type(model).__name__}"
            )
        return model

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's final records whose calls have no stored result yet."""
        return self._new_results(turn)

    # --- the model step ------------------------------------------------------------

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        model_calls = decode_model_call_count(turn.framework_run_state)
        new_results = self._new_results(turn) if turn.is_resuming else []
        request = self._request(turn, self._input_messages(turn, new_results))

        # The turn is visible to the client's transport (get_model_step_context()).
        with serving_model_step(turn):
            async with self.client().messages.stream(**request) as stream:
                async for event in stream:
                    if event.type == "text":
                        turn.events.write_text_delta(event.text)
                    elif event.type == "thinking":
                        turn.events.write_reasoning_delta(event.thinking)
                message = await stream.get_final_message()

        # Stored exactly as returned (absent fields left out), so it replays unchanged.
        content = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
        stored = assistant_messages(content)
        new_messages = [*new_results, *stored]
        usage = _usage_of(message.usage)
        metadata = self._metadata(request["model"], message)
        uses = tool_uses_of(decode_item(stored[0].framework_item))
        return counted_model_step_outcome(
            model_calls,
            new_messages=new_messages,
            tool_calls=[self._deferred_call(turn, use) for use in uses],
            usage=usage,
            model_call_metadata=metadata,
        )

    def _input_messages(
        self, turn: AgentTurnContext, new_results: Sequence[FrameworkMessage]
    ) -> list[dict[str, Any]]:
        """The request's messages: the summary note first once the session compacted."""
        items = stored_items([*turn.messages, *new_results])
        if turn.context_summary is not None:
            note = user_message(context_summary_note(turn.context_summary))
            items.insert(0, decode_item(note.framework_item))
        return request_messages(items)

    # --- compaction ----------------------------------------------------------------

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Counts with the Messages API's ``count_tokens``; when that request fails, one
        token per four characters of the request's JSON."""
        new_results = self._new_results(turn) if turn.is_resuming else []
        request = self._request(turn, self._input_messages(turn, new_results))
        counted = counted_request(request)
        try:
            result = await self.client().messages.count_tokens(**counted)
            return result.input_tokens
        except anthropic.APIError as error:
            logger.debug("count_tokens failed (%s); estimating the input tokens", error)
            return estimate_request_tokens(counted)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """A cut between model responses whose ``tool_use`` blocks all have results."""
        return compaction_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One ``messages.create`` call without tools: ``CONTEXT_SUMMARY_INSTRUCTIONS`` as the
        system prompt and the earlier summary and messages as one user message, to the
        model ``resolve_model`` chooses for the request's session settings."""
        model = self.model_for(request.session_settings)
        message = await self.client().messages.create(
            model=model,
            max_tokens=self.max_tokens,
            system=CONTEXT_SUMMARY_INSTRUCTIONS,
            messages=[{"role": "user", "content": summary_text(request, self.max_tokens)}],
        )
        summary = "".join(block.text for block in message.content if block.type == "text")
        return ContextSummaryResult(
            summary=summary,
            usage=_usage_of(message.usage),
            model_call_metadata=self._metadata(model, message),
        )

    def _request(self, turn: AgentTurnContext, messages: list[dict[str, Any]]) -> dict[str, Any]:
        planning = turn.interaction_mode is InteractionMode.PLANNING
        # A planning turn offers only write_todos.
        tools = [] if planning else [tool.definition() for tool in self.tools.values()]
        for name in turn.enabled_built_in_tools:
            if name in self.tools:
                raise ValueError(f"tool {name} uses the name of an enabled built-in tool")
        tools.extend(
            {"name": d.name, "description": d.description, "input_schema": dict(d.parameters)}
            for d in enabled_builtin_tool_definitions(turn.enabled_built_in_tools)
            if not planning or d.name == WRITE_TODOS
        )
        model = self.model_for(turn.session_settings)
        request: dict[str, Any] = {
            **self.request_options,
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        if self.system_prompt is not None:
            request["system"] = (
                self.system_prompt
                if isinstance(self.system_prompt, str)
                else [dict(block) for block in self.system_prompt]
            )
        note = build_plan_note(turn.plan, turn.interaction_mode)
        if note is not None:
            request["system"] = _with_system_text(request.get("system"), note)
        if planning:
            offered = {tool["name"] for tool in tools}
            # The API wants every tool of the history defined; these cannot run now.
            tools.extend(
                {
                    "name": name,
                    "description": "Not available in this planning turn.",
                    "input_schema": {"type": "object"},
                }
                for name in _tool_names_used(messages)
                if name not in offered
            )
        if tools:
            request["tools"] = tools
        if self._forces_tool_choice(turn, model):
            request["tool_choice"] = {"type": "tool", "name": WRITE_TODOS}
        if self.thinking is not None:
            request["thinking"] = self.thinking
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    def _forces_tool_choice(self, turn: AgentTurnContext, model: str) -> bool:
        """``required`` on a planning turn's first model call while no draft exists; a model
        ``resolve_model`` chose is checked here, the runner's own when it was built."""
        draft = turn.plan is not None and turn.plan.status == "draft"
        forced = (
            self.planning_tool_choice == "required"
            and turn.interaction_mode is InteractionMode.PLANNING
            and decode_model_call_count(turn.framework_run_state) == 0
            and not draft
        )
        if forced and model != self.model:
            check_forced_tool_choice(model, self.thinking, where="the model resolve_model chose")
        return forced

    def _metadata(self, request_model: str, message: Message) -> ModelCallMetadata:
        return model_call_metadata(
            request_model=request_model,
            response_model=message.model,
            provider_name=PROVIDER,
            response_id=message.id,
            finish_reasons=(message.stop_reason,) if message.stop_reason else None,
        )

    def _new_results(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        """Results of this turn's final records whose calls have no stored result."""
        this_turn = [m for m in turn.messages if m.turn_id == turn.turn_id]
        results: list[FrameworkMessage] = []
        for use in unanswered_tool_uses(this_turn):
            record = turn.recorded_tool_call(use.call_id)
            if record is not None and record.is_final:
                results.append(tool_result_message(record))
        return results

    def _deferred_call(self, turn: AgentTurnContext, use: ToolUse) -> DeferredToolCall:
        check_model_tool_call_id(use.name, use.call_id)
        return DeferredToolCall(
            tool_call_id=use.call_id,
            tool_name=use.name,
            arguments=use.arguments,
            policy=policy_of_call(turn, use.name, self.tools.get(use.name)),
        )

    # --- the tool step -------------------------------------------------------------

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        # A tool that raised StartedToolTask hands its task to the session's PollToolTask.
        return await returning_started_task(self._run_deferred_tool_call(call))

    async def _run_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        record = call.tool_call
        tool = known_tool(self.tools, record.tool_name)
        arguments = tool_arguments_object(record.arguments)
        output = await tool.run(arguments, call)
        # A tool's own question goes to the session as it is (AwaitQuestionAnswer).
        return output if isinstance(output, ToolInputRequested) else ToolExecutionResult(output)


def _check_optional_type(name: str, value: object, kind: type, described: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be {described} or None, got {type(value).__name__}")


def _usage_of(usage: Usage) -> AgentUsage:
    """This response's usage. Anthropic counts cached input apart; the whole input is reported."""
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    return single_response_usage(
        input_tokens=usage.input_tokens + cache_read + cache_write,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _with_system_text(system: Any, text: str) -> str | list[dict[str, Any]]:
    """The system prompt with ``text`` after it, as a string or as one more text block."""
    if system is None:
        return text
    if isinstance(system, str):
        return f"{system}\n\n{text}"
    return [*cast("list[dict[str, Any]]", system), {"type": "text", "text": text}]


def _tool_names_used(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the tools that ``tool_use`` blocks of ``messages`` call, in first-use order."""
    names: list[str] = []
    for message in messages:
        content: Any = message.get("content")
        if not isinstance(content, list):
            continue
        for block in cast("list[Any]", content):
            if not isinstance(block, dict):
                continue
            fields = cast("dict[str, Any]", block)
            name = fields.get("name")
            if fields.get("type") == "tool_use" and isinstance(name, str) and name not in names:
                names.append(name)
    return names
