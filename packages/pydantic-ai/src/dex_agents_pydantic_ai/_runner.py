"""``PydanticAIRunner``: a Pydantic AI ``Agent`` as an ``AgentFrameworkRunner``.

``run_model_step`` runs the agent once on the stored history with every tool
deferred (``DeferEveryToolCall``), so the run makes one model request and ends
with either the final output or ``DeferredToolRequests``. On resume, the final
records of the previous response's calls go back in through Pydantic AI's own
``DeferredToolResults`` (a rejection as ``ToolDenied``, a failure as
``ToolFailed``). The turn's messages are stored as it goes, so the run state is
only a marker and the history always comes from stored framework items.

``execute_deferred_tool_call`` runs the agent's real tool through Pydantic AI
itself, without a model request: Pydantic AI's ``ToolManager`` over the agent's
toolsets validates the arguments, builds the tool's ``RunContext`` (deps
included) and runs the function (``run_tool_directly``). An agent with capabilities of
its own, whose tool hooks only a run applies, gets a run instead: its history
ends in the one call, approved, and the run stops before the model request that
would follow. Either way the tool return Pydantic AI produces becomes the outcome.

A planning turn offers only ``write_todos`` (a capability's ``prepare_tools``), forced
on its first request with ``planning_tool_choice="required"`` (its ``get_model_settings``),
and every request shows the plan note before the turn's messages. ``resolve_model``
chooses the model of each turn's requests, summary requests included, from
``turn.session_settings`` (``agent.iter(model=...)``).

The runner keeps no session state between calls, only a per-Worker cache of each
session's decoded history (``SessionHistories``, checked against the stored items on
every Step); deps come from the factory's ``deps`` or ``deps_factory``, never from
session state.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic_ai import Agent, AgentRun, CallToolsNode, ModelRequestNode, RunContext, UserPromptNode
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDefinition,
    ToolDenied,
)
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset

from dex_agents import AgentToolCallStatus, AgentUsage
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
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolTaskForwarding,
    TurnCompleted,
    answer_tool_call,
    build_plan_note,
    check_model_tool_call_id,
    check_planning_tool_choice,
    context_summary_note,
    describe_tool_call_outcome,
    enabled_builtin_tool_definitions,
    estimate_stored_tokens,
    forced_tool_choice_refusal,
    is_anthropic_model,
    model_call_metadata,
    returning_started_task,
    serving_deferred_tool_execution,
    serving_model_step,
    single_response_usage,
    thinking_enabled,
)
from dex_agents.values import FrameworkMessage, InteractionMode, add_agent_usage, empty_agent_usage
from dex_agents_pydantic_ai._compaction import compaction_cutoff, summary_prompt
from dex_agents_pydantic_ai._mcp import stamp_mcp_idempotency_keys
from dex_agents_pydantic_ai._messages import (
    SessionHistories,
    ToolReturnOutcome,
    decode_history,
    decoded_message_count,
    project_message,
    project_messages,
    tool_results_request,
    user_prompt_message,
)
from dex_agents_pydantic_ai._tools import (
    IDEMPOTENCY_KEY_METADATA_KEY,
    DeferEveryToolCall,
    RefuseToolDeferral,
    ToolAskedTheUser,
    counting_questions,
    resolve_call_policy,
    resolve_model,
    run_tool_directly,
)

__all__ = ["DepsFactory", "PydanticAIRunner"]

DepsT = TypeVar("DepsT")

_RUN_STATE_FORMAT = "dex-agents-pydantic-ai/1"

DepsFactory = Callable[[str], DepsT | Awaitable[DepsT] | AbstractAsyncContextManager[DepsT]]
"""Builds a Step's deps from the session ID: a value, an awaitable, or an async context
manager that the Step enters and exits (``@asynccontextmanager`` functions qualify)."""

AgentModel = Model | KnownModelName | str
ModelResolver = Callable[[Mapping[str, Any]], AgentModel]
"""Maps a turn's session settings to the model of its requests (a ``Model`` or a name)."""


class PydanticAIRunner(ToolTaskForwarding, Generic[DepsT]):
    """Runs ``agent`` under the session Flow; see the module docstring.

    ``deps`` is passed to every model step and tool call; ``deps_factory`` instead
    builds them for each Step from the session ID (sync or async). Give at most
    one. Deps are never stored: a Worker that restarts builds them again. When
    ``deps_factory`` returns an async context manager (an ``@asynccontextmanager``
    function, a client opened for the Step), the Step enters it, uses what it
    yields as deps, and exits it when the Step ends, also when the Step fails.

    With ``stream_text``, model requests are streamed and text reaches the
    session's live events as it arrives (the model must support streaming);
    otherwise each response's text is written once it is complete.

    ``resolve_model`` maps a turn's session settings to the model of its requests,
    summary requests included (the agent's model when it is ``None``); choose only
    among models the Worker built. ``planning_tool_choice="required"`` forces
    ``write_todos`` on a planning turn's first request while no draft exists; it is
    refused here for a model that refuses a forced tool choice, and checked for a
    resolved model when a turn forces the request.
    """

    supports_plan_mode = True
    """A planning turn offers the model only ``write_todos``."""

    def __init__(
        self,
        agent: Agent[DepsT, Any],
        *,
        deps: DepsT | None = None,
        deps_factory: DepsFactory[DepsT] | None = None,
        stream_text: bool = False,
        resolve_model: ModelResolver | None = None,
        planning_tool_choice: Literal["auto", "required"] = "auto",
    ) -> None:
        if not isinstance(agent, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"agent must be a pydantic_ai.Agent, got {type(agent).__name__}")
        if resolve_model is not None and not callable(resolve_model):
            raise TypeError("resolve_model must be a function of the session settings")
        check_planning_tool_choice(
            planning_tool_choice,
            _model_refusal(agent.model, agent.model_settings),
            where=f"PydanticAIRunner of agent {agent.name or 'agent'!r}",
        )
        if deps is not None and deps_factory is not None:
            raise ValueError("give deps or deps_factory, not both")
        if deps_factory is not None and not callable(deps_factory):
            raise TypeError("deps_factory must be callable")
        if not isinstance(stream_text, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"stream_text must be a bool, got {stream_text!r}")
        self.agent = agent
        self.resolve_model = resolve_model
        self.planning_tool_choice: Literal["auto", "required"] = planning_tool_choice
        self._deps = deps
        self._deps_factory = deps_factory
        self._stream_text = stream_text
        self._tool_step_models: dict[str, Model | None] = {}
        # Each session's decoded history, extended as it grows (a cache, not session state).
        self._histories = SessionHistories()
        self._built_in_toolset_cache: dict[tuple[str, ...], list[AbstractToolset[Any]]] = {}
        # The run's default tool retries, as the last model step's run resolved them.
        self._tool_retries: int | None = None

    @property
    def session_histories(self) -> SessionHistories:
        """This runner's per-Worker cache of each session's decoded history."""
        return self._histories

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_prompt_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the stored response's calls, when its calls have no results stored."""
        history = decode_history(turn.messages)
        if not history or not isinstance(history[-1], ModelResponse):
            return []
        calls = history[-1].tool_calls
        if not calls:
            return []
        results: list[tuple[ToolCallPart, str, ToolReturnOutcome]] = []
        for call in calls:
            answer = answer_tool_call(turn, call.tool_call_id)
            results.append((call, answer.text, _return_outcome(answer.status)))
        return project_message(tool_results_request(results))

    # --- the model step ------------------------------------------------------------

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        history = self._histories.history(turn.flow_id, turn.messages)
        note = build_plan_note(turn.plan, turn.interaction_mode)
        if note is not None:
            # The plan note goes before the turn's messages, in every model request.
            this_turn = decoded_message_count(m for m in turn.messages if m.turn_id == turn.turn_id)
            at = max(0, len(history) - this_turn)
            history.insert(at, ModelRequest(parts=[UserPromptPart(content=note)]))
        if turn.context_summary is not None:
            # The summary of the earlier messages leads the input as a user prompt.
            note = UserPromptPart(content=context_summary_note(turn.context_summary))
            history.insert(0, ModelRequest(parts=[note]))
        model_calls = _model_calls_of(turn.framework_run_state)
        results: DeferredToolResults | None = None
        if turn.is_resuming:
            results = _results_of_previous_response(turn, history)
        elif not history or not isinstance(history[-1], ModelRequest):
            raise RuntimeError(
                "the turn's first model call needs the stored history to end with the user"
                " message; it ends with a model response"
            )
        async with self._step_deps(turn.flow_id) as deps:
            history = await self._with_system_prompts(history, deps)
            with serving_model_step(turn):
                step = await self._run_one_request(turn, history, results, deps)
        responses = [message for message in step.new if isinstance(message, ModelResponse)]
        if not responses:
            raise RuntimeError("the Pydantic AI run made no model request")
        usage = _usage_of(responses)
        metadata = self._metadata_of(responses[-1], self._model_for(turn.session_settings))
        text = _response_text(responses[-1])
        if text and not self._stream_text:
            turn.events.write_text_delta(text)
        if not step.deferred:
            return TurnCompleted(
                new_messages=project_messages(step.new), usage=usage, model_call_metadata=metadata
            )
        return ToolCallsRequested(
            framework_run_state=json.dumps(
                {
                    "format": _RUN_STATE_FORMAT,
                    "model_calls": model_calls + len(responses),
                    "pending_tool_call_ids": [call.tool_call_id for call in step.deferred],
                }
            ),
            tool_calls=[self._deferred_call(turn, step.declared, call) for call in step.deferred],
            usage=usage,
            new_messages=project_messages(step.new),
            model_call_metadata=metadata,
        )

    # --- compaction ----------------------------------------------------------------

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Pydantic AI counts no tokens before a request, so this estimates one token per
        four characters of the stored messages' JSON and the summary."""
        return estimate_stored_tokens(turn.messages, turn.context_summary)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """A cut between model responses whose tool calls all have returns stored."""
        return compaction_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One run of a tool-less agent on the same model, with
        ``CONTEXT_SUMMARY_INSTRUCTIONS``, over the earlier summary and the messages."""
        model = self._model_for(request.session_settings)
        summarizer = Agent(model, instructions=CONTEXT_SUMMARY_INSTRUCTIONS)
        result = await summarizer.run(summary_prompt(request))
        responses = [m for m in result.new_messages() if isinstance(m, ModelResponse)]
        return ContextSummaryResult(
            summary=str(result.output),
            usage=_usage_of(responses),
            model_call_metadata=self._metadata_of(responses[-1], model) if responses else None,
        )

    def _model_for(self, session_settings: Mapping[str, Any]) -> AgentModel | None:
        """The model of a request under ``session_settings``: ``resolve_model``'s choice,
        else the agent's."""
        if self.resolve_model is None:
            return self.agent.model
        model = self.resolve_model(session_settings)
        if not isinstance(model, Model | str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"resolve_model must return a pydantic_ai Model or a model name,"
                f" got {type(model).__name__}"
            )
        return model

    async def _run_one_request(
        self,
        turn: AgentTurnContext,
        history: list[ModelMessage],
        results: DeferredToolResults | None,
        deps: object,
    ) -> _StepRun:
        """Run the agent up to the response's tool calls, or to its final output.

        The run is driven node by node: once the model answered with tool calls,
        it stops before Pydantic AI handles them, so none runs and the agent's
        output type and validators stay as they are. A final answer goes through
        Pydantic AI's own output handling (output tools, validators).
        """
        deferral = DeferEveryToolCall()
        try:
            return await self._model_step_run(history, results, deps, turn, deferral)
        finally:
            if deferral.run_settings.tool_retries is not None:
                self._tool_retries = deferral.run_settings.tool_retries

    async def _model_step_run(
        self,
        history: list[ModelMessage],
        results: DeferredToolResults | None,
        deps: object,
        turn: AgentTurnContext,
        deferral: DeferEveryToolCall,
    ) -> _StepRun:
        capabilities: list[AbstractCapability[Any]] = [deferral]
        forced = False
        if turn.interaction_mode is InteractionMode.PLANNING:
            forced = self._forced_planning_call(turn)
            capabilities.append(_PlanningTurn(forced=forced))
        model = None
        if self.resolve_model is not None:
            model = self._model_for(turn.session_settings)
            if forced:
                # The agent's own model was checked when the runner was built.
                check_planning_tool_choice(
                    "required",
                    _model_refusal(model, self.agent.model_settings),
                    where="the model resolve_model chose",
                )
        async with self.agent.iter(
            message_history=history,
            deferred_tool_results=results,
            deps=cast(DepsT, deps),
            capabilities=capabilities,
            toolsets=self._built_in_toolsets(turn),
            conversation_id=turn.flow_id,
            model=model,
        ) as run:
            node = run.next_node
            requested = False
            while not Agent.is_end_node(node):
                if isinstance(node, CallToolsNode) and requested:
                    calls = _calls_to_defer(node.model_response, deferral.output_tools)
                    if calls:
                        return _StepRun(run.new_messages(), calls, dict(deferral.declared))
                if isinstance(node, ModelRequestNode):
                    requested = True
                    if self._stream_text:
                        await _stream_text(node, run, turn)
                node = await run.next(node)
            new = run.new_messages()
            output: object = node.data.output
            if isinstance(output, DeferredToolRequests):
                # The agent's own output type took deferred calls (one of its capabilities
                # deferred them); they run in tool Steps like the rest.
                last = next(m for m in reversed(new) if isinstance(m, ModelResponse))
                calls = _deferred_calls_in_model_order(last, output)
                return _StepRun(new, calls, dict(deferral.declared))
            return _StepRun(new, [], dict(deferral.declared))

    def _forced_planning_call(self, turn: AgentTurnContext) -> bool:
        """``required`` on a planning turn's first request while no draft exists."""
        draft = turn.plan is not None and turn.plan.status == "draft"
        return self.planning_tool_choice == "required" and not turn.is_resuming and not draft

    def _deferred_call(
        self, turn: AgentTurnContext, declared: dict[str, ToolDefinition], call: ToolCallPart
    ) -> DeferredToolCall:
        check_model_tool_call_id(call.tool_name, call.tool_call_id)
        return DeferredToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.args_as_json_str(),
            policy=resolve_call_policy(turn, call.tool_name, declared.get(call.tool_name)),
        )

    def _built_in_toolsets(self, turn: AgentTurnContext) -> list[AbstractToolset[Any]]:
        """The session's enabled built-in tools, offered as external tools; built once per
        set of names (an ``ExternalToolset`` holds only its definitions)."""
        names = tuple(turn.enabled_built_in_tools)
        toolsets = self._built_in_toolset_cache.get(names)
        if toolsets is None:
            toolsets = _external_built_in_toolsets(names)
            self._built_in_toolset_cache[names] = toolsets
        return list(toolsets)

    async def _with_system_prompts(
        self, history: list[ModelMessage], deps: object
    ) -> list[ModelMessage]:
        """``history`` with the agent's system prompts in its first request, when it has none.

        Pydantic AI adds system prompts only to a conversation's first request,
        and the session stores that request itself (``build_user_message``), so
        they are resolved and put in front on every model call instead; the
        stored items stay unchanged.
        """
        # System prompts only ever sit in the first request: no need to scan the rest.
        first = next(
            (index for index, message in enumerate(history) if isinstance(message, ModelRequest)),
            None,
        )
        if first is None:
            return history
        request = cast(ModelRequest, history[first])
        if any(isinstance(part, SystemPromptPart) for part in request.parts):
            return history
        parts = await self.agent.system_prompt_parts(
            deps=cast(DepsT, deps), message_history=history
        )
        if not parts:
            return history
        prompted = replace(request, parts=[*parts, *request.parts])
        return [*history[:first], prompted, *history[first + 1 :]]

    def _metadata_of(self, response: ModelResponse, model: AgentModel | None) -> ModelCallMetadata:
        request_model: str | None
        if isinstance(model, Model):
            request_model = model.model_name
        elif isinstance(model, str):
            request_model = model.partition(":")[2] or model
        else:
            request_model = None
        return model_call_metadata(
            request_model=request_model,
            response_model=response.model_name,
            provider_name=response.provider_name,
            response_id=response.provider_response_id,
            finish_reasons=None if response.finish_reason is None else [response.finish_reason],
        )

    # --- the tool step -------------------------------------------------------------

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        # A tool that raised StartedToolTask hands its task to the session's PollToolTask.
        return await returning_started_task(self._run_deferred_tool_call(call))

    async def _run_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        record = call.tool_call
        tool_call = ToolCallPart(
            tool_name=record.tool_name, args=record.arguments, tool_call_id=record.tool_call_id
        )
        # The call alone, approved: Pydantic AI validates and runs it, then would ask
        # the model again, which is where the run stops.
        stamp_mcp_idempotency_keys(self.agent)
        async with self._step_deps(call.flow_id) as deps:
            with serving_deferred_tool_execution(call), counting_questions():
                try:
                    tool_return = await self._run_tool(tool_call, deps, call)
                except UnexpectedModelBehavior as error:
                    # Pydantic AI gave up on the call, e.g. a retry past the tool's max_retries.
                    raise ToolExecutionError(str(error)) from error
                except ToolAskedTheUser as asked:
                    # The tool's question (ask_user, CallDeferred(kind="question")).
                    return asked.question
        text = tool_return.model_response_str(wrap_if_error=False)
        if tool_return.outcome == "success":
            return ToolExecutionResult(text)
        raise ToolExecutionError(text)

    async def _run_tool(
        self, tool_call: ToolCallPart, deps: object, call: DeferredToolExecution
    ) -> ToolReturnPart:
        metadata = {IDEMPOTENCY_KEY_METADATA_KEY: call.idempotency_key}
        model = self._tool_step_model()
        if model is not None:
            direct = await run_tool_directly(
                self.agent,
                tool_call,
                deps=deps,
                model=model,
                tool_retries=self._tool_retries,
                conversation_id=call.flow_id,
                metadata=metadata,
            )
            if direct is not None:
                return direct
        return await self._run_tool_in_agent_run(tool_call, deps, call, metadata)

    def _tool_step_model(self) -> Model | None:
        """The agent's model for a tool's ``RunContext``, built once per model name."""
        name = self.agent.model
        if isinstance(name, Model) or name is None:
            return name
        if name not in self._tool_step_models:
            self._tool_step_models[name] = resolve_model(self.agent)
        return self._tool_step_models[name]

    async def _run_tool_in_agent_run(
        self,
        tool_call: ToolCallPart,
        deps: object,
        call: DeferredToolExecution,
        metadata: dict[str, Any],
    ) -> ToolReturnPart:
        """The fallback of ``_run_tool``: an agent run that stops once the call has run."""
        history: list[ModelMessage] = [ModelResponse(parts=[tool_call])]
        async with self.agent.iter(
            message_history=history,
            deferred_tool_results=DeferredToolResults(
                approvals={tool_call.tool_call_id: ToolApproved()}
            ),
            deps=cast(DepsT, deps),
            capabilities=[RefuseToolDeferral()],
            metadata=metadata,
            conversation_id=call.flow_id,
        ) as run:
            node = run.next_node
            while isinstance(node, UserPromptNode | CallToolsNode):
                node = await run.next(node)
            if not isinstance(node, ModelRequestNode):
                raise RuntimeError(
                    f"Pydantic AI ended the run of tool call {tool_call.tool_call_id} without"
                    " its result"
                )
            for part in node.request.parts:
                if isinstance(part, ToolReturnPart) and part.tool_call_id == tool_call.tool_call_id:
                    return part
        raise RuntimeError(f"Pydantic AI returned no result for tool call {tool_call.tool_call_id}")

    # --- deps ----------------------------------------------------------------------

    @asynccontextmanager
    async def _step_deps(self, session_id: str) -> AsyncGenerator[object]:
        """The deps of one Step; an async context manager from the factory is exited after it."""
        if self._deps_factory is None:
            yield self._deps
            return
        produced = self._deps_factory(session_id)
        if isinstance(produced, AbstractAsyncContextManager):
            async with cast(AbstractAsyncContextManager[object], produced) as deps:
                yield deps
            return
        if inspect.isawaitable(produced):
            produced = await produced
        yield produced


@dataclass
class _PlanningTurn(AbstractCapability[Any]):
    """Capability for a planning turn's model step: offer only ``write_todos``, and force a
    call of it (``tool_choice``) when ``forced``."""

    forced: bool = False

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        return [tool for tool in tool_defs if tool.name == WRITE_TODOS]

    def get_model_settings(self) -> Callable[[RunContext[Any]], ModelSettings] | None:
        if not self.forced:
            return None
        # A callable, which Pydantic AI trusts to vary per request: this step makes one.
        return lambda ctx: ModelSettings(tool_choice=[WRITE_TODOS])


def _model_refusal(model: AgentModel | None, settings: object) -> str | None:
    """Why ``model`` (with the agent's ``settings``, when they are a dict rather than a
    function of the run) refuses a forced tool choice, or ``None``."""
    if isinstance(model, Model):
        name: str | None = model.model_name
        provider: str | None = model.system
    else:
        name, provider = model, None
    options: Mapping[str, Any] = {}
    if isinstance(settings, Mapping):
        options = cast(Mapping[str, Any], settings)
    thinking = thinking_enabled(options)
    anthropic = is_anthropic_model(name, provider)
    return forced_tool_choice_refusal(name, extended_thinking=thinking and anthropic)


@dataclass(frozen=True)
class _StepRun:
    new: list[ModelMessage]
    deferred: list[ToolCallPart]
    declared: dict[str, ToolDefinition]


async def _stream_text(
    node: ModelRequestNode[Any, Any], run: AgentRun[Any, Any], turn: AgentTurnContext
) -> None:
    """Stream ``node``'s model request, writing its text to the turn's live events."""
    async with node.stream(run.ctx) as events:
        async for event in events:
            text = ""
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                text = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text = event.delta.content_delta
            if text:
                turn.events.write_text_delta(text)


def _external_built_in_toolsets(names: Sequence[str]) -> list[AbstractToolset[Any]]:
    definitions = enabled_builtin_tool_definitions(names)
    if not definitions:
        return []
    return [
        ExternalToolset[Any](
            [
                ToolDefinition(
                    name=definition.name,
                    description=definition.description,
                    parameters_json_schema=dict(definition.parameters),
                )
                for definition in definitions
            ],
            id="dex-built-in-tools",
        )
    ]


def _calls_to_defer(response: ModelResponse, output_tools: set[str]) -> list[ToolCallPart]:
    """The response's tool calls, unless one of them calls an output tool.

    A call of an output tool ends the run with its final result (Pydantic AI
    skips function calls beside it), so such a response is left to Pydantic AI.
    A call of a tool nobody offered is deferred like the rest; its tool Step
    reports the unknown name to the model.
    """
    calls = response.tool_calls
    if any(call.tool_name in output_tools for call in calls):
        return []
    return calls


def _model_calls_of(run_state: str | None) -> int:
    if run_state is None:
        return 0
    try:
        state = json.loads(run_state)
        if state.get("format") != _RUN_STATE_FORMAT:
            raise ValueError(f"unknown format {state.get('format')!r}")
        return int(state["model_calls"])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise RuntimeError(
            f"the turn's framework run state was not written by this runner: {error}"
        ) from error


def _return_outcome(status: AgentToolCallStatus | None) -> ToolReturnOutcome:
    if status is AgentToolCallStatus.SUCCEEDED:
        return "success"
    if status is AgentToolCallStatus.REJECTED:
        return "denied"
    return "failed"


def _results_of_previous_response(
    turn: AgentTurnContext, history: list[ModelMessage]
) -> DeferredToolResults:
    """Each call of the stored response, answered from its final record."""
    if not history or not isinstance(history[-1], ModelResponse) or not history[-1].tool_calls:
        raise RuntimeError(
            "the turn resumes after tool calls, but the stored history does not end with the"
            " model response that made them"
        )
    results = DeferredToolResults()
    for call in history[-1].tool_calls:
        record = turn.recorded_tool_call(call.tool_call_id)
        if record is None or not record.is_final:
            raise RuntimeError(
                f"tool call {call.tool_call_id} ({call.tool_name}) has no final record to"
                " resume from"
            )
        text = describe_tool_call_outcome(record)
        outcome = _return_outcome(record.status)
        if outcome == "denied":
            results.approvals[call.tool_call_id] = ToolDenied(text)
        elif outcome == "failed":
            results.calls[call.tool_call_id] = ToolFailed(text)
        else:
            results.calls[call.tool_call_id] = text
    return results


def _deferred_calls_in_model_order(
    response: ModelResponse, requests: DeferredToolRequests
) -> list[ToolCallPart]:
    deferred = {call.tool_call_id for call in [*requests.calls, *requests.approvals]}
    calls = [call for call in response.tool_calls if call.tool_call_id in deferred]
    if not calls:
        raise RuntimeError("Pydantic AI deferred tool calls the last model response did not make")
    return calls


def _response_text(response: ModelResponse) -> str:
    return "".join(part.content for part in response.parts if isinstance(part, TextPart))


def _usage_of(responses: Sequence[ModelResponse]) -> AgentUsage:
    """Usage of this step's responses only, never the run's running totals."""
    total = empty_agent_usage()
    for response in responses:
        usage = response.usage
        total = add_agent_usage(
            total,
            single_response_usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                reasoning_tokens=usage.output_reasoning_tokens,
            ),
        )
    return total
