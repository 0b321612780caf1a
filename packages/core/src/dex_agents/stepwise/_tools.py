"""Function tools: a Python function (or an explicit JSON Schema) the model can call.

The schema of a typed function comes from pydantic; the model's arguments are
checked with ``jsonschema`` before the function runs, so a mismatch reaches the
model as a tool failure instead of running the tool with bad input.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast, get_type_hints, overload

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import pydantic
import pydantic_core

from dex_agents.runner import (
    AgentEventWriter,
    CancellationSignal,
    DeferredToolOutcome,
    StartedToolTask,
    SupportsToolTasks,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
    declared_effect_in,
    tool_declaration_metadata,
)
from dex_agents.values import ToolEffect

__all__ = [
    "FunctionTool",
    "ToolCallContext",
    "declare_tool_effect",
    "encode_tool_result",
    "function_tool",
]

# Tool names that providers accept (OpenAI and Anthropic agree on this pattern).
_TOOL_NAME_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
)
_MAX_TOOL_NAME_LENGTH = 64


@dataclass(frozen=True, kw_only=True)
class ToolCallContext:
    """What a function tool gets besides its arguments.

    ``idempotency_key`` (``<flow_id>/<turn_id>/<tool_call_id>``) is the same on
    every attempt: pass it to the remote system so a retried write is dropped.
    ``input_answers`` are the user's answers to this tool's own questions (a
    ``ToolInputRequested`` result), oldest first; ``input_continuation`` is the
    continuation of the last question.
    """

    flow_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    idempotency_key: str
    attempt: int
    events: AgentEventWriter
    cancellation: CancellationSignal
    deadline: datetime
    heartbeat: Callable[[], Awaitable[None]]
    heartbeat_checkpoint: str | None = None
    save_heartbeat_checkpoint: Callable[[str], Awaitable[None]] | None = None
    input_answers: tuple[str, ...] = ()
    input_continuation: str | None = None
    supports_tool_tasks: bool = False
    """Whether the tool may return ``ToolTaskStarted``: it has a ``tasks`` poller."""


ToolExecute = Callable[[dict[str, Any], ToolCallContext], Awaitable[object] | object]
"""The body of a function tool: validated arguments and the call's context."""


@dataclass(frozen=True)
class FunctionTool:
    """A tool the Stepwise loop offers to its model and runs in a tool Step.

    ``effect`` picks ``CallTool`` (``read``, ``idempotent_write``) or
    ``CallSingleAttemptTool`` (other writes) and the default approval; ``None``
    takes the agent's ``default_tool_effect``. ``requires_approval`` of ``None``
    follows the effect. A session ``ToolPolicy`` for the name wins over both.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    execute: ToolExecute
    effect: ToolEffect | None = None
    requires_approval: bool | None = None
    tasks: SupportsToolTasks | None = None

    def __post_init__(self) -> None:
        validate_tool_name(self.name)
        if not isinstance(self.description, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tool {self.name}: description must be a string")
        if self.effect is not None and not isinstance(self.effect, ToolEffect):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tool {self.name}: effect must be a ToolEffect")
        if self.requires_approval is not None and not isinstance(self.requires_approval, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tool {self.name}: requires_approval must be a bool or None")
        if not isinstance(self.parameters, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"tool {self.name}: parameters must be a JSON Schema object (a dict)")
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: the parameters schema must have type 'object'")
        try:
            jsonschema.Draft202012Validator.check_schema(dict(self.parameters))
        except jsonschema.exceptions.SchemaError as error:
            raise ValueError(f"tool {self.name}: invalid JSON Schema: {error.message}") from error
        if not callable(self.execute):
            raise TypeError(f"tool {self.name}: execute must be callable")
        if self.tasks is not None and not callable(getattr(self.tasks, "poll_tool_task", None)):
            raise TypeError(
                f"tool {self.name}: tasks must have poll_tool_task and cancel_tool_task"
            )

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """The model's argument text as a checked object, or ``ToolExecutionError``."""
        return parse_tool_arguments(self.name, self.parameters, arguments)

    async def run(self, arguments: str, context: ToolCallContext) -> DeferredToolOutcome:
        """Check the arguments, run ``execute``, and encode its result."""
        parsed = self.parse_arguments(arguments)
        try:
            produced = self.execute(parsed, context)
            result = await produced if inspect.isawaitable(produced) else produced
        except StartedToolTask as started:
            # The adapters' way to start a task works in a function tool too.
            result = started.started
        if isinstance(result, ToolInputRequested):
            return result
        if isinstance(result, ToolTaskStarted):
            if self.tasks is None:
                # Not a ToolExecutionError: the call's effect decides its outcome.
                raise TypeError(
                    f"tool {self.name} started a task but has no tasks poller; "
                    "pass function_tool(..., tasks=...)"
                )
            return result
        return ToolExecutionResult(encode_tool_result(result))


def validate_tool_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("a tool name must be a non-empty string")
    if len(name) > _MAX_TOOL_NAME_LENGTH or not set(name) <= _TOOL_NAME_CHARACTERS:
        raise ValueError(
            f"invalid tool name {name!r}: use at most {_MAX_TOOL_NAME_LENGTH} letters, "
            "digits, underscores or hyphens"
        )


def parse_tool_arguments(
    tool_name: str, schema: Mapping[str, Any], arguments: str
) -> dict[str, Any]:
    """Decode and check the model's arguments against ``schema``.

    Raises ``ToolExecutionError`` with a message the model can act on.
    """
    try:
        value: object = json.loads(arguments) if arguments.strip() else {}
    except ValueError as error:
        raise ToolExecutionError(
            f"invalid arguments for tool {tool_name}: not valid JSON ({error})"
        ) from error
    if not isinstance(value, dict):
        raise ToolExecutionError(f"invalid arguments for tool {tool_name}: expected a JSON object")
    decoded = cast("dict[str, Any]", value)
    problem = _first_schema_error(schema, decoded)
    if problem is not None:
        where, message = problem
        location = f" at {where}" if where else ""
        raise ToolExecutionError(f"invalid arguments for tool {tool_name}{location}: {message}")
    return decoded


def _enum_by_python_equality(
    validator: Any, enums: Any, instance: Any, schema: Any
) -> Iterator[jsonschema.exceptions.ValidationError]:
    # Python's ``==``, as the other core checks ``enum``: ``true`` matches ``1``.
    del validator, schema
    if instance not in enums:
        yield jsonschema.exceptions.ValidationError(f"{instance!r} is not one of {enums!r}")


_ArgumentValidator: Any = jsonschema.validators.extend(  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    jsonschema.Draft202012Validator, {"enum": _enum_by_python_equality}
)


def _first_schema_error(schema: Mapping[str, Any], value: dict[str, Any]) -> tuple[str, str] | None:
    """The most relevant schema violation as ``(path, message)``, or ``None``."""
    validator: Any = _ArgumentValidator(dict(schema))
    best_match: Any = jsonschema.exceptions.best_match  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    error: Any = best_match(validator.iter_errors(value))
    if error is None:
        return None
    path: list[object] = list(error.absolute_path)
    return "/".join(str(part) for part in path), str(error.message)


def encode_tool_result(result: object) -> str:
    """The text the model sees: a ``str`` as is, anything else as JSON.

    JSON uses ``json.dumps``'s default separators, so every core produces the same
    text; pydantic models and dataclasses are dumped to JSON data first.
    """
    if isinstance(result, str):
        return result
    return json.dumps(_to_json_data(result))


def _to_json_data(value: object) -> object:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")
    if isinstance(value, Mapping):
        mapping = cast("Mapping[object, object]", value)
        return {str(key): _to_json_data(item) for key, item in mapping.items()}
    if isinstance(value, list | tuple):
        sequence = cast("list[object] | tuple[object, ...]", value)
        return [_to_json_data(item) for item in sequence]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")
    except (
        pydantic.PydanticSchemaGenerationError,
        pydantic_core.PydanticSerializationError,
    ) as error:
        raise TypeError(
            f"a tool returned a {type(value).__name__}, which cannot be written as JSON; "
            "return a str or JSON data"
        ) from error


# --- building tools from typed functions -------------------------------------------


@overload
def function_tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    requires_approval: bool | None = None,
    tasks: SupportsToolTasks | None = None,
) -> FunctionTool: ...


@overload
def function_tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    requires_approval: bool | None = None,
    parameters: None = None,
    execute: None = None,
    tasks: SupportsToolTasks | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


@overload
def function_tool(
    fn: None = None,
    /,
    *,
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    execute: ToolExecute,
    effect: ToolEffect | None = None,
    requires_approval: bool | None = None,
    tasks: SupportsToolTasks | None = None,
) -> FunctionTool: ...


def function_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: ToolEffect | None = None,
    requires_approval: bool | None = None,
    parameters: Mapping[str, Any] | None = None,
    execute: ToolExecute | None = None,
    tasks: SupportsToolTasks | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a ``FunctionTool``.

    From a typed function, ``function_tool(fn, effect=...)`` or as a decorator
    ``@function_tool(effect=...)``: the name is the function's, the description
    its docstring, and the schema comes from its parameters' annotations. A
    parameter annotated ``ToolCallContext`` receives the call's context.

    With an explicit schema, pass ``name``, ``description``, ``parameters`` and
    ``execute(arguments, context)``.

    ``tasks`` (an object with ``poll_tool_task`` and ``cancel_tool_task``) lets the tool
    return ``ToolTaskStarted`` for remote work the session then polls; see "Tool tasks".
    """
    if parameters is not None or execute is not None:
        if fn is not None:
            raise TypeError("pass either a function or parameters and execute, not both")
        if parameters is None or execute is None or name is None or description is None:
            raise TypeError("an explicit tool needs name, description, parameters and execute")
        return FunctionTool(
            name=name,
            description=description,
            # A copy, so later changes to the caller's dict cannot change the offered schema.
            parameters=dict(parameters) if isinstance(parameters, Mapping) else parameters,  # pyright: ignore[reportUnnecessaryIsInstance]
            execute=execute,
            effect=effect,
            requires_approval=requires_approval,
            tasks=tasks,
        )

    def build(function: Callable[..., Any]) -> FunctionTool:
        return _tool_from_function(
            function,
            name=name,
            description=description,
            effect=effect,
            requires_approval=requires_approval,
            tasks=tasks,
        )

    if fn is None:
        return build
    return build(fn)


def _tool_from_function(
    function: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    effect: ToolEffect | None,
    requires_approval: bool | None,
    tasks: SupportsToolTasks | None = None,
) -> FunctionTool:
    tool_name = name or getattr(function, "__name__", "")
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function)
    except NameError as error:
        raise TypeError(
            f"tool {tool_name}: cannot resolve its annotations ({error}); define the types "
            "they name at module level"
        ) from error
    context_parameter: str | None = None
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name}: *args and **kwargs cannot be tool parameters")
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {tool_name}: positional-only parameters are not supported")
        annotation = hints.get(parameter.name)
        if annotation is ToolCallContext:
            context_parameter = parameter.name
            continue
        if annotation is None:
            raise TypeError(
                f"tool {tool_name}: parameter {parameter.name!r} needs a type annotation"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    arguments_model: type[pydantic.BaseModel] = pydantic.create_model(  # pyright: ignore[reportCallIssue, reportUnknownVariableType]
        f"{tool_name}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    schema = arguments_model.model_json_schema()
    schema.pop("title", None)
    text = description if description is not None else inspect.getdoc(function) or ""

    async def execute(arguments: dict[str, Any], context: ToolCallContext) -> object:
        try:
            validated = arguments_model.model_validate(arguments)
        except pydantic.ValidationError as error:
            raise ToolExecutionError(
                f"invalid arguments for tool {tool_name}: {_first_error(error)}"
            ) from error
        # Pass validated values (nested models included), not their dumps.
        keyword_arguments: dict[str, Any] = {
            field_name: getattr(validated, field_name) for field_name in fields
        }
        if context_parameter is not None:
            keyword_arguments[context_parameter] = context
        produced = function(**keyword_arguments)
        return await produced if inspect.isawaitable(produced) else produced

    return FunctionTool(
        name=tool_name,
        description=text,
        parameters=schema,
        execute=execute,
        effect=effect,
        requires_approval=requires_approval,
        tasks=tasks,
    )


def _first_error(error: pydantic.ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    return f"{location}: {first['msg']}" if location else first["msg"]


def declare_tool_effect(
    tool: FunctionTool, effect: ToolEffect | str, *, requires_approval: bool | None = None
) -> FunctionTool:
    """A copy of ``tool`` that declares ``effect`` (and approval, when given).

    The same call declares a tool's effect in every dex-agents adapter.
    ``requires_approval=None`` follows the effect; a session ``ToolPolicy`` wins.
    """
    if not isinstance(tool, FunctionTool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool must be a Stepwise FunctionTool, got {type(tool).__name__}")
    declared = declared_effect_in(tool_declaration_metadata(effect), tool.name)
    return dataclasses.replace(tool, effect=declared, requires_approval=requires_approval)
