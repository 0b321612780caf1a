"""Options of ``create_agent_session_flow``, checked when the Flow is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TypedDict

from dex_agents._builtin_tools import BUILT_IN_TOOL_NAMES
from dex_agents._compaction import CompactionPolicy
from dex_agents._contract import ToolPolicy
from dex_agents._storage import (
    DEFAULT_MESSAGE_CHUNK_MAX_BYTES,
    DEFAULT_MESSAGE_CHUNK_SIZE,
    DEFAULT_MESSAGE_WINDOW_SIZE,
    DEFAULT_RETAINED_MESSAGE_LIMIT,
    MessageStorageSettings,
)
from dex_agents._values import ToolEffect
from dex_agents.tracing._options import TracingOptions

__all__ = [
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
    "DEFAULT_MAX_DURABLE_WAIT",
    "DEFAULT_MAX_USER_MESSAGE_BYTES",
    "KNOWN_BUILT_IN_TOOLS",
    "AgentSessionOptionValues",
    "AgentSessionOptions",
]

DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_DURABLE_WAIT = timedelta(days=365)
# A message is stored twice (display text and framework item), both escaped as JSON,
# and the stored value must stay under the engine's largest value (2 MiB locally).
DEFAULT_MAX_USER_MESSAGE_BYTES = 512 * 1024
KNOWN_BUILT_IN_TOOLS = frozenset(BUILT_IN_TOOL_NAMES)


@dataclass(frozen=True, kw_only=True)
class AgentSessionOptions:
    """How the session treats tools, events and interrupts.

    Attributes:
        tool_policies: ``ToolPolicy`` by tool name; wins over the framework's effect
            and the default effect.
        default_tool_effect: Effect of a tool without a policy or framework effect.
        event_stream_capacity_bytes: Byte budget of the ``AgentEvents`` Stream, shared
            by every session of the Flow type.
        interrupt_deadline: After this long, a pending approval is rejected with
            ``"approval deadline passed"`` (a question with ``"question deadline passed"``);
            ``None`` waits forever.
        built_in_tools: Built-in tools the session handles (``"ask_user"``,
            ``"durable_wait"``); their names are reserved.
        max_durable_wait: Longest ``durable_wait``, whole seconds, at least one.
        compaction: A ``CompactionPolicy`` that keeps model input under the context
            window; needs a runner with the compaction methods. ``None`` never compacts.
        message_window_size: Most messages the ``AgentMessages`` window holds; at least
            ``message_chunk_size``.
        message_chunk_size: Most messages per ``AgentMessageChunks`` chunk.
        message_chunk_max_bytes: Most bytes per chunk, 1 to 8,388,608; a larger message
            is stored straight into its own chunk.
        retained_message_limit: With compaction, the stored messages retention always
            keeps; ``None`` keeps every message.
        plan_mode_enabled: Accept ``plan_mode`` user messages; needs ``"write_todos"`` in
            ``built_in_tools`` and a runner whose ``supports_plan_mode`` is true.
        max_user_message_bytes: Largest text ``send_user_message`` accepts, and largest
            answer or rejection message, in UTF-8 bytes; the JSON string the session
            stores (an ASCII character is one byte, another character six or twelve)
            may be at most 1.5 times as large. A larger one gets ``False``.
        question_supersedes_later_calls: When a response calls ``ask_user``, record every
            call after the first question as ``rejected`` (``cancellation_reason``
            ``"superseded_by_user_input"``) without running it, so the turn waits only for
            the answer. Off by default: every call of a response runs.
    """

    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=lambda: dict[str, ToolPolicy]())
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES
    interrupt_deadline: timedelta | None = None
    built_in_tools: tuple[str, ...] = ()
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT
    compaction: CompactionPolicy | None = None
    message_window_size: int = DEFAULT_MESSAGE_WINDOW_SIZE
    message_chunk_size: int = DEFAULT_MESSAGE_CHUNK_SIZE
    message_chunk_max_bytes: int = DEFAULT_MESSAGE_CHUNK_MAX_BYTES
    retained_message_limit: int | None = DEFAULT_RETAINED_MESSAGE_LIMIT

    @property
    def message_storage(self) -> MessageStorageSettings:
        """The storage bounds as one value."""
        return MessageStorageSettings(
            window_size=self.message_window_size,
            chunk_size=self.message_chunk_size,
            chunk_max_bytes=self.message_chunk_max_bytes,
            retained_message_limit=self.retained_message_limit,
        )

    plan_mode_enabled: bool = False
    tracing: TracingOptions | None = None
    """OpenTelemetry spans (``dex_agents.tracing``); ``None``: on, with the defaults."""
    max_user_message_bytes: int = DEFAULT_MAX_USER_MESSAGE_BYTES
    question_supersedes_later_calls: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.tool_policies, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("tool_policies must be a mapping of tool name to ToolPolicy")
        policies: dict[str, ToolPolicy] = {}
        for name, policy in dict(self.tool_policies).items():
            if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ValueError("tool_policies keys must be non-empty tool names")
            if not isinstance(policy, ToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"tool_policies[{name!r}] must be a ToolPolicy")
            policies[name] = policy
        object.__setattr__(self, "tool_policies", MappingProxyType(policies))
        if not isinstance(self.default_tool_effect, ToolEffect):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("default_tool_effect must be a ToolEffect")
        capacity = self.event_stream_capacity_bytes
        if type(capacity) is not int or capacity <= 0:
            raise ValueError("event_stream_capacity_bytes must be a positive integer")
        deadline = self.interrupt_deadline
        if deadline is not None and (
            not isinstance(deadline, timedelta) or deadline <= timedelta(0)  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError("interrupt_deadline must be a positive timedelta or None")
        if isinstance(self.built_in_tools, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "built_in_tools must be a sequence of names, such as ('ask_user',), not a string"
            )
        built_in = tuple(self.built_in_tools)
        for name in built_in:
            if name not in KNOWN_BUILT_IN_TOOLS:
                raise ValueError(
                    f"unknown built-in tool {name!r}; choose from {sorted(KNOWN_BUILT_IN_TOOLS)}"
                )
            if name in policies:
                raise ValueError(
                    f"tool_policies has a policy for {name!r}, a reserved built-in tool name"
                )
        if len(set(built_in)) != len(built_in):
            raise ValueError("built_in_tools lists a tool twice")
        object.__setattr__(self, "built_in_tools", built_in)
        wait = self.max_durable_wait
        if (
            not isinstance(wait, timedelta)  # pyright: ignore[reportUnnecessaryIsInstance]
            or wait < timedelta(seconds=1)
            or wait.microseconds != 0
        ):
            raise ValueError("max_durable_wait must be a whole number of seconds, at least 1")
        if self.compaction is not None and not isinstance(self.compaction, CompactionPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("compaction must be a CompactionPolicy or None")
        _ = self.message_storage  # checks the storage bounds
        if not isinstance(self.plan_mode_enabled, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("plan_mode_enabled must be a bool")
        if self.plan_mode_enabled and "write_todos" not in built_in:
            raise ValueError(
                "plan_mode_enabled needs 'write_todos' in built_in_tools: plans are written with it"
            )
        limit = self.max_user_message_bytes
        if type(limit) is not int or limit <= 0:
            raise ValueError("max_user_message_bytes must be a positive integer")
        if not isinstance(self.question_supersedes_later_calls, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("question_supersedes_later_calls must be a bool")


class AgentSessionOptionValues(TypedDict, total=False):
    """The fields of ``AgentSessionOptions`` as keywords of a flow factory.

    Flow factories take them as ``**session_options: Unpack[AgentSessionOptionValues]``,
    so pyright rejects a misspelled option; ``create_agent_session_flow`` raises
    ``TypeError`` for it at run time. Keep the keys equal to the fields of
    ``AgentSessionOptions`` (a test checks).
    """

    tool_policies: Mapping[str, ToolPolicy]
    default_tool_effect: ToolEffect
    event_stream_capacity_bytes: int
    interrupt_deadline: timedelta | None
    built_in_tools: Sequence[str]
    max_durable_wait: timedelta
    compaction: CompactionPolicy | None
    message_window_size: int
    message_chunk_size: int
    message_chunk_max_bytes: int
    retained_message_limit: int | None
    plan_mode_enabled: bool
    tracing: TracingOptions | None
    max_user_message_bytes: int
    question_supersedes_later_calls: bool
