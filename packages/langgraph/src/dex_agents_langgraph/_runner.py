"""``LangGraphRunner``: a LangGraph graph as an ``AgentFrameworkRunner``.

Each ``run_model_step`` runs the graph once on a fresh state (no checkpointer):
the stored messages, plus the results of the previous response from the turn's
final records, go in as the ``messages`` channel, and the graph makes exactly
one model call and stops before any tool runs. Two shapes do that:

* ``LangGraphRunner.from_chat_model(model, tools)``: the runner's own
  one-node graph (``START -> model -> END``) that calls ``model.bind_tools(tools)``.
* ``LangGraphRunner(graph, tools)``: a prebuilt agent graph compiled with
  ``interrupt_before=["tools"]`` (``create_react_agent``, ``create_agent``).

The turn's messages are stored as it goes (``ToolCallsRequested.new_messages``),
so the run state only counts the turn's model calls. Tools run in
``execute_deferred_tool_call`` with the real LangChain tool.

The one-node graph plans (``supports_plan_mode``): a planning turn binds only
``write_todos``, forced on the first call with ``planning_tool_choice="required"``,
and every model call shows the plan note before the turn's messages. ``resolve_model``
chooses the chat model per session from ``turn.session_settings``, summary calls
included; a graph runner's ``resolve_graph`` chooses the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.pregel import Pregel

from dex_agents import AgentUsage
from dex_agents.runner import (
    WRITE_TODOS,
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolTaskForwarding,
    build_plan_note,
    check_model_tool_call_id,
    check_planning_tool_choice,
    context_summary_note,
    counted_model_step_outcome,
    decode_model_call_count,
    model_call_metadata,
    returning_started_task,
    serving_model_step,
    single_response_usage,
)
from dex_agents.values import FrameworkMessage, InteractionMode
from dex_agents_langgraph._compaction import (
    compaction_cutoff,
    estimate_stored_tokens,
    summary_request_messages,
)
from dex_agents_langgraph._messages import (
    RequestedToolCall,
    framework_message_of,
    framework_messages_of,
    message_text,
    pair_tool_calls_with_results,
    result_message_of,
    stored_messages,
    tool_calls_of,
    unanswered_tool_calls,
    user_message,
)
from dex_agents_langgraph._tools import (
    built_in_tool_schemas,
    chat_model_forced_tool_choice_refusal,
    check_tool_declarations,
    configurable,
    run_deferred_tool_call,
    tool_call_policy,
    tool_list,
    tools_of_node,
)

__all__ = ["LangGraphRunner"]

BUILT_IN_TOOLS_CONFIG_KEY = "dex_built_in_tools"
"""``config["configurable"]`` key of the built-in tools the one-node graph offers."""
PLANNING_CONFIG_KEY = "dex_planning"
"""``config["configurable"]`` key: ``"auto"`` or ``"required"`` in a planning turn (the
one-node graph binds only ``write_todos``), absent otherwise."""
SESSION_SETTINGS_CONFIG_KEY = "dex_session_settings"
"""``config["configurable"]`` key of the turn's session settings, for a graph (a dynamic
model function, say) that chooses by them itself."""
CHAT_MODEL_CONFIG_KEY = "dex_chat_model"
"""``config["configurable"]`` key of the chat model the one-node graph calls (the one
``resolve_model`` chose for the session)."""

ModelResolver = Callable[[Mapping[str, Any]], BaseChatModel]
"""Maps a turn's session settings to the chat model of its calls."""
GraphResolver = Callable[[Mapping[str, Any]], Pregel[Any, Any, Any, Any]]
"""Maps a turn's session settings to the graph that runs its model steps."""

MODEL_NODE = "model"
TOOLS_NODE = "tools"


class LangGraphRunner(ToolTaskForwarding):
    """Runs a LangGraph agent graph under the session Flow; keeps no state between calls.

    ``graph`` is a compiled graph whose state has a ``messages`` channel (the
    ``add_messages`` reducer). It must make one model call per run and stop
    before it runs a tool: compile a prebuilt agent with
    ``interrupt_before=["tools"]``. ``tools`` are the LangChain tools the model
    may call; for a prebuilt agent they default to the tools of its ``"tools"``
    node. Use ``from_chat_model`` for a chat model and tools without a graph.
    """

    supports_plan_mode = False
    """A graph binds its model to its tools itself; ``from_chat_model``'s runner plans."""

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        tools: Sequence[BaseTool] | None = None,
        *,
        messages_key: str = "messages",
        tools_node: str = TOOLS_NODE,
        resolve_graph: GraphResolver | None = None,
        resolve_model: ModelResolver | None = None,
    ) -> None:
        _check_graph(graph, tools_node)
        if resolve_graph is not None and not callable(resolve_graph):
            raise TypeError("resolve_graph must be a function of the session settings")
        if resolve_model is not None and not callable(resolve_model):
            raise TypeError("resolve_model must be a function of the session settings")
        if not isinstance(messages_key, str) or not messages_key:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"messages_key must be a non-empty str, got {messages_key!r}")
        resolved = tool_list(tools) if tools is not None else tools_of_node(graph, tools_node)
        by_name: dict[str, BaseTool] = {}
        for tool in resolved:
            if not isinstance(tool, BaseTool):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    f"tools must be LangChain tools (BaseTool, @tool), got {type(tool).__name__}"
                )
            if tool.name in by_name:
                raise ValueError(f"two tools are named {tool.name!r}")
            check_tool_declarations(tool)
            by_name[tool.name] = tool
        self.graph = graph
        self.tools: Mapping[str, BaseTool] = by_name
        self.messages_key = messages_key
        self.tools_node = tools_node
        self.resolve_graph = resolve_graph
        """Chooses the graph of a turn's model steps from its session settings (one graph
        per model, say); ``None`` runs ``graph`` for every session."""
        self.resolve_model = resolve_model
        """Chooses the chat model of a turn's calls, summary calls included, from its
        session settings; ``None`` keeps ``summary_model`` (and, for ``from_chat_model``,
        the runner's model)."""
        self.summary_model: BaseChatModel | None = None
        """The chat model ``summarize_context`` calls; ``from_chat_model`` sets it to the
        runner's model. Set it for a graph runner that runs with a compaction policy."""
        self.planning_tool_choice: Literal["auto", "required"] = "auto"
        """``required`` forces ``write_todos`` on a planning turn's first model call while no
        draft exists (``from_chat_model``'s runner)."""

    @classmethod
    def from_chat_model(
        cls,
        model: BaseChatModel,
        tools: Sequence[BaseTool] = (),
        *,
        system_prompt: str | None = None,
        bind_tools_options: Mapping[str, Any] | None = None,
        resolve_model: ModelResolver | None = None,
        planning_tool_choice: Literal["auto", "required"] = "auto",
    ) -> LangGraphRunner:
        """The runner's own one-node graph: one ``model.bind_tools(tools)`` call per model step.

        ``system_prompt`` is prepended to every call and never stored.
        ``bind_tools_options`` go to ``bind_tools`` (such as ``parallel_tool_calls``).
        Built-in tools the session enables are offered next to ``tools``; a planning turn
        binds only ``write_todos``, with ``tool_choice="write_todos"`` on its first call
        while no draft exists when ``planning_tool_choice`` is ``"required"`` (refused
        here for a model that refuses a forced tool choice). ``resolve_model`` maps a
        turn's session settings to the chat model of its calls, summary calls included
        (``model`` when it is ``None``); choose only among models the Worker built.
        """
        if not isinstance(model, BaseChatModel):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"model must be a LangChain chat model, got {type(model).__name__}")
        check_planning_tool_choice(
            planning_tool_choice,
            chat_model_forced_tool_choice_refusal(model),
            where="LangGraphRunner.from_chat_model",
        )
        if system_prompt is not None and not isinstance(system_prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"system_prompt must be a str or None, got {type(system_prompt).__name__}"
            )
        if bind_tools_options is not None and not isinstance(bind_tools_options, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "bind_tools_options must be a mapping of bind_tools keyword arguments,"
                f" got {type(bind_tools_options).__name__}"
            )
        own_tools = tool_list(tools)
        options = dict(bind_tools_options or {})

        async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            settings = configurable(config)
            built_ins: Sequence[str] = settings.get(BUILT_IN_TOOLS_CONFIG_KEY, ())
            planning: str | None = settings.get(PLANNING_CONFIG_KEY)
            chosen: BaseChatModel = settings.get(CHAT_MODEL_CONFIG_KEY) or model
            bind_options = dict(options)
            if planning is None:
                offered: list[Any] = [*own_tools, *built_in_tool_schemas(built_ins)]
            else:
                # A planning turn offers only write_todos, forced when planning says so.
                offered = built_in_tool_schemas([n for n in built_ins if n == WRITE_TODOS])
                bind_options.pop("tool_choice", None)
                if planning == "required" and offered:
                    bind_options["tool_choice"] = WRITE_TODOS
            runnable = chosen.bind_tools(offered, **bind_options) if offered else chosen
            messages: list[BaseMessage] = list(state["messages"])
            if system_prompt:
                messages = [SystemMessage(content=system_prompt), *messages]
            response = await runnable.ainvoke(messages, config)
            return {"messages": [response]}

        builder = StateGraph(MessagesState)
        builder.add_node(MODEL_NODE, call_model)  # pyright: ignore[reportUnknownMemberType]
        builder.add_edge(START, MODEL_NODE)
        builder.add_edge(MODEL_NODE, END)
        graph = builder.compile(name="dex_agents_model_step")  # pyright: ignore[reportUnknownMemberType]
        runner = cls(graph, own_tools, resolve_model=resolve_model)
        runner.summary_model = model
        runner.planning_tool_choice = planning_tool_choice
        runner.supports_plan_mode = True
        return runner

    # --- messages ------------------------------------------------------------------

    def build_user_message(self, text: str) -> FrameworkMessage:
        return user_message(text)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's final records whose calls have no stored result yet."""
        return [framework_message_of(result) for result in self._new_results(turn)]

    # --- the model step ------------------------------------------------------------

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        model_calls = decode_model_call_count(turn.framework_run_state)
        new_results = self._new_results(turn) if turn.is_resuming else []
        # Stored forms are taken before the graph runs: its reducer gives messages ids.
        stored_results = [framework_message_of(result) for result in new_results]
        inputs = pair_tool_calls_with_results([*stored_messages(turn.messages), *new_results])
        note = build_plan_note(turn.plan, turn.interaction_mode)
        if note is not None:
            # The plan note goes before the turn's messages, in every model call.
            earlier = sum(1 for message in turn.messages if message.turn_id != turn.turn_id)
            inputs.insert(earlier, HumanMessage(content=note))
        if turn.context_summary is not None:
            # The summary of the earlier messages leads the input as a human message.
            inputs.insert(0, HumanMessage(content=context_summary_note(turn.context_summary)))

        stream = _ModelStream(turn.events)
        final_state: Any = None
        graph = self._graph_for(turn.session_settings)
        with serving_model_step(turn):
            async for mode, data in graph.astream(  # pyright: ignore[reportUnknownMemberType]
                {self.messages_key: inputs},
                self._model_config(turn, model_calls),
                stream_mode=["messages", "values"],
            ):
                if mode == "messages":
                    message, metadata = cast(tuple[BaseMessage, Mapping[str, Any]], data)
                    stream.on_message(message, metadata)
                else:
                    final_state = data
        produced = self._produced_messages(final_state, len(inputs))
        response = _single_response(produced)

        new_messages = [*stored_results, *(s for m in produced for s in framework_messages_of(m))]
        usage = _usage_of(response)
        metadata = stream.metadata_for(response)
        return counted_model_step_outcome(
            model_calls,
            new_messages=new_messages,
            tool_calls=[self._deferred_call(turn, call) for call in tool_calls_of(response)],
            usage=usage,
            model_call_metadata=metadata,
        )

    # --- compaction ----------------------------------------------------------------

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """LangChain's ``count_tokens_approximately`` over the stored messages and summary."""
        return estimate_stored_tokens(turn)

    async def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """A cut between model responses whose tool calls all have ``ToolMessage`` results."""
        return compaction_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One ``summary_model.ainvoke`` without tools: ``CONTEXT_SUMMARY_INSTRUCTIONS`` and
        the earlier summary and messages as one human message."""
        model = self.summary_model
        if self.resolve_model is not None:
            model = self._resolved_model(request.session_settings)
        if model is None:
            raise RuntimeError(
                "this LangGraph runner has no summary_model; set runner.summary_model to the"
                " chat model that summarizes, or build the runner with from_chat_model"
            )
        response = await model.ainvoke(summary_request_messages(request))
        return ContextSummaryResult(
            summary=message_text(response),
            usage=_usage_of(response),
            model_call_metadata=_ModelStream(request.events).metadata_for(response),
        )

    def _model_config(self, turn: AgentTurnContext, model_calls: int) -> RunnableConfig:
        settings: dict[str, Any] = {
            BUILT_IN_TOOLS_CONFIG_KEY: tuple(turn.enabled_built_in_tools),
            SESSION_SETTINGS_CONFIG_KEY: dict(turn.session_settings),
        }
        if turn.interaction_mode is InteractionMode.PLANNING:
            draft = turn.plan is not None and turn.plan.status == "draft"
            forced = self.planning_tool_choice == "required" and model_calls == 0 and not draft
            settings[PLANNING_CONFIG_KEY] = "required" if forced else "auto"
        if self.resolve_model is not None:
            chosen = self._resolved_model(turn.session_settings)
            if settings.get(PLANNING_CONFIG_KEY) == "required":
                # The runner's own model was checked when it was built.
                check_planning_tool_choice(
                    "required",
                    chat_model_forced_tool_choice_refusal(chosen),
                    where="the chat model resolve_model chose",
                )
            settings[CHAT_MODEL_CONFIG_KEY] = chosen
        # Metadata reaches every callback and tracer (LangSmith) of the run.
        return RunnableConfig(
            metadata={
                "dex_flow_id": turn.flow_id,
                "dex_turn_id": turn.turn_id,
                "dex_attempt": turn.attempt,
                "dex_step_execution_id": turn.step_execution_id,
                "dex_model_call_index": model_calls,
            },
            configurable=settings,
        )

    def _graph_for(self, session_settings: Mapping[str, Any]) -> Pregel[Any, Any, Any, Any]:
        if self.resolve_graph is None:
            return self.graph
        graph = self.resolve_graph(session_settings)
        _check_graph(graph, self.tools_node)
        return graph

    def _resolved_model(self, session_settings: Mapping[str, Any]) -> BaseChatModel:
        assert self.resolve_model is not None
        model = self.resolve_model(session_settings)
        if not isinstance(model, BaseChatModel):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"resolve_model must return a LangChain chat model, got {type(model).__name__}"
            )
        return model

    def _new_results(self, turn: AgentTurnContext) -> list[ToolMessage]:
        """Results of this turn's final records whose calls have no stored result."""
        this_turn = [m for m in turn.messages if m.turn_id == turn.turn_id]
        results: list[ToolMessage] = []
        for call_id, _name in unanswered_tool_calls(stored_messages(this_turn)):
            record = turn.recorded_tool_call(call_id)
            if record is not None and record.is_final:
                results.append(result_message_of(record))
        return results

    def _produced_messages(self, final_state: Any, input_count: int) -> list[BaseMessage]:
        if not isinstance(final_state, Mapping):
            raise RuntimeError("the graph produced no state; it must have a messages channel")
        state = cast(Mapping[str, Any], final_state)
        messages = state.get(self.messages_key)
        if not isinstance(messages, list):
            raise RuntimeError(
                f"the graph state has no {self.messages_key!r} list; pass messages_key="
            )
        produced = cast(list[BaseMessage], messages)[input_count:]
        if any(isinstance(m, ToolMessage) for m in produced):
            raise RuntimeError(
                "the graph ran a tool inside the model step; compile it with"
                " interrupt_before=['tools'] so that tools run in their own Steps"
            )
        return produced

    def _deferred_call(self, turn: AgentTurnContext, call: RequestedToolCall) -> DeferredToolCall:
        check_model_tool_call_id(call.name, call.call_id)
        return DeferredToolCall(
            tool_call_id=call.call_id,
            tool_name=call.name,
            arguments=call.arguments,
            policy=tool_call_policy(turn, call.name, self.tools.get(call.name)),
        )

    # --- the tool step -------------------------------------------------------------

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        # A tool that raised StartedToolTask hands its task to the session's PollToolTask.
        return await returning_started_task(run_deferred_tool_call(self.tools, call))


def _check_graph(graph: object, tools_node: str) -> None:
    if not isinstance(graph, Pregel):
        raise TypeError(
            "graph must be a compiled LangGraph graph (StateGraph(...).compile(),"
            f" create_react_agent(...)), got {type(graph).__name__}"
        )
    compiled = cast(Pregel[Any, Any, Any, Any], graph)
    if tools_node in compiled.nodes:
        interrupts = compiled.interrupt_before_nodes
        if interrupts != "*" and tools_node not in interrupts:
            raise ValueError(
                f"the graph runs its {tools_node!r} node itself; compile it with"
                f" interrupt_before=[{tools_node!r}] so that every tool call is deferred"
                " to its own durable Step"
            )


class _ModelStream:
    """Writes the model's streamed text and reasoning to the turn's events."""

    def __init__(self, events: AgentEventWriter) -> None:
        self._events = events
        self._model_metadata: Mapping[str, Any] = {}

    def on_message(self, message: BaseMessage, metadata: Mapping[str, Any]) -> None:
        if not isinstance(message, AIMessage):
            return
        if "ls_model_name" in metadata or "ls_provider" in metadata:
            self._model_metadata = metadata
        for reasoning in _reasoning_texts(message):
            self._events.write_reasoning_delta(reasoning)
        text = message_text(message)
        if text:
            self._events.write_text_delta(text)

    def metadata_for(self, response: AIMessage) -> ModelCallMetadata:
        response_metadata = response.response_metadata
        finish = response_metadata.get("finish_reason") or response_metadata.get("stop_reason")
        return model_call_metadata(
            request_model=_str_or_none(self._model_metadata.get("ls_model_name")),
            response_model=_str_or_none(
                response_metadata.get("model_name") or response_metadata.get("model")
            ),
            provider_name=_str_or_none(self._model_metadata.get("ls_provider")),
            response_id=_str_or_none(response_metadata.get("id")),
            finish_reasons=(finish,) if isinstance(finish, str) else None,
        )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _reasoning_texts(message: AIMessage) -> list[str]:
    """Provider-authored reasoning in a message's content blocks (thinking, reasoning summaries)."""
    if isinstance(message.content, str):
        return []
    texts: list[str] = []
    for block in message.content:
        if not isinstance(block, dict):
            continue
        entry = cast(Mapping[str, Any], block)
        kind = entry.get("type")
        if kind == "thinking" and isinstance(entry.get("thinking"), str):
            texts.append(entry["thinking"])
        elif kind == "reasoning":
            if isinstance(entry.get("reasoning"), str):
                texts.append(entry["reasoning"])
            summary = entry.get("summary")
            if isinstance(summary, list):
                for part in cast(list[Any], summary):
                    if isinstance(part, dict):
                        text = cast(Mapping[str, Any], part).get("text")
                        if isinstance(text, str):
                            texts.append(text)
    return [text for text in texts if text]


def _single_response(produced: Sequence[BaseMessage]) -> AIMessage:
    responses = [m for m in produced if isinstance(m, AIMessage)]
    if len(responses) != 1:
        raise RuntimeError(
            f"the graph made {len(responses)} model responses in one model step; it must make"
            " exactly one model call per run and stop before its tools"
        )
    return responses[0]


def _usage_of(response: AIMessage) -> AgentUsage:
    """The usage of this one response (LangChain's ``usage_metadata``), never a running total."""
    usage = response.usage_metadata
    if usage is None:
        return AgentUsage(model_calls=1)
    input_details: Mapping[str, Any] = usage.get("input_token_details") or {}
    output_details: Mapping[str, Any] = usage.get("output_token_details") or {}
    return single_response_usage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        total_tokens=usage["total_tokens"],
        cache_read_tokens=input_details.get("cache_read"),
        cache_write_tokens=input_details.get("cache_creation"),
        reasoning_tokens=output_details.get("reasoning"),
    )
