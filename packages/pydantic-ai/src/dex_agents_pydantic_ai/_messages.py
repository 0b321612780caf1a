"""Pydantic AI messages as stored session messages, and back.

Every stored ``framework_item`` is Pydantic AI's own message JSON, written with
``ModelMessagesTypeAdapter``: a JSON list holding one ``ModelRequest`` or
``ModelResponse`` exactly as the run returned it, or an empty list. A message
with several tool calls or tool returns is stored as one session message per
call, so each has its display fields; only the first carries the Pydantic AI
message and the others carry ``[]``. The history a model call gets is therefore
the concatenation of every stored item, in sequence order, replayed unchanged
(thinking parts with their signatures included).

``SessionHistories`` keeps each session's paired history per Worker and extends it
as the session grows (see its section below).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_json

from dex_agents import AgentMessage
from dex_agents.runner import OUTCOME_UNKNOWN_TOOL_RESULT, DecodeCache
from dex_agents.values import FrameworkMessage

__all__ = [
    "DEFAULT_KEPT_SESSIONS",
    "EMPTY_FRAMEWORK_ITEM",
    "SessionHistories",
    "answer_orphaned_tool_calls",
    "decode_history",
    "decoded_message_count",
    "encode_framework_item",
    "project_message",
    "project_messages",
    "tool_results_request",
    "user_prompt_message",
]

EMPTY_FRAMEWORK_ITEM = "[]"
"""The item of a display-only message: the rest of a message stored with its first call."""

ToolReturnOutcome = Literal["success", "failed", "denied"]


def encode_framework_item(message: ModelMessage) -> str:
    """Pydantic AI's JSON of ``message``, as a one-element ``ModelMessagesTypeAdapter`` list."""
    return ModelMessagesTypeAdapter.dump_json([message]).decode()


_DECODED_ITEMS: DecodeCache[tuple[ModelMessage, ...]] = DecodeCache()
"""Decoded framework items of this process by their JSON: every model Step reads the
whole history again, and a stored item never changes."""


def decode_history(messages: Iterable[AgentMessage]) -> list[ModelMessage]:
    """The Pydantic AI history stored in ``messages``, from their framework items only.

    Each item is decoded once per process; the caller gets its own copy of every
    message (Pydantic AI fills run metadata into the history it is given).
    """
    history: list[ModelMessage] = []
    for message in messages:
        try:
            decoded = _DECODED_ITEMS.get_or_decode(message.framework_item, _decode_item)
        except ValueError as error:
            raise ValueError(
                f"stored message {message.sequence} is not Pydantic AI message JSON; this"
                f" session was not written by the Pydantic AI runner ({error})"
            ) from error
        history.extend(_own_copy(item) for item in decoded)
    return history


def decoded_message_count(messages: Iterable[AgentMessage]) -> int:
    """How many Pydantic AI messages ``messages`` decode to (each item decoded once per
    process, none copied)."""
    return sum(
        len(_DECODED_ITEMS.get_or_decode(message.framework_item, _decode_item))
        for message in messages
    )


def _decode_item(framework_item: str) -> tuple[ModelMessage, ...]:
    return tuple(ModelMessagesTypeAdapter.validate_json(framework_item))


def _own_copy(message: ModelMessage) -> ModelMessage:
    """A copy whose fields and parts list can be replaced without touching the cached one.

    The instance dict is copied directly: ``copy.copy`` goes through ``__reduce_ex__``
    and costs three times as much, once per message of the history on every model Step.
    """
    if hasattr(message, "__dict__"):
        copied = object.__new__(type(message))
        copied.__dict__.update(message.__dict__)
    else:
        copied = copy.copy(message)
    copied.parts = list(message.parts)  # pyright: ignore[reportAttributeAccessIssue]
    return copied


def answer_orphaned_tool_calls(
    history: Sequence[ModelMessage], *, previous: ModelMessage | None = None
) -> list[ModelMessage]:
    """``history`` in which every tool call of a response has a result in the next request.

    A stored call whose result was never stored (a turn that failed and whose
    unfinished messages could not be built) gets a failed tool return with the
    outcome-unknown text at the front of the request after it, since providers
    refuse a call without a result. The stored items stay as they are; a
    response that ends the history is left alone (its calls are being resumed).
    ``previous`` is the message before ``history``, when it continues a paired one.
    """
    paired: list[ModelMessage] = []
    for message in history:
        if isinstance(message, ModelRequest) and isinstance(previous, ModelResponse):
            # Tool returns and retry prompts answer a call by its ID (older stored
            # histories hold Pydantic AI's deprecated retry prompt parts).
            answered = {getattr(part, "tool_call_id", None) for part in message.parts}
            missing = [call for call in previous.tool_calls if call.tool_call_id not in answered]
            if missing:
                unknown = tool_results_request(
                    [(call, OUTCOME_UNKNOWN_TOOL_RESULT, "failed") for call in missing]
                )
                message = replace(message, parts=[*unknown.parts, *message.parts])
        paired.append(message)
        previous = message
    return paired


def user_prompt_message(text: str) -> FrameworkMessage:
    """The user message of ``text``: a ``ModelRequest`` with one ``UserPromptPart``.

    Timestamps are left out of the stored JSON so the same text always gives the
    same item; Pydantic AI fills them in when it reads the item back.
    """
    dumped = cast(
        list[dict[str, Any]],
        ModelMessagesTypeAdapter.dump_python(
            [ModelRequest(parts=[UserPromptPart(content=text)])], mode="json"
        ),
    )
    request = dumped[0]
    request.pop("timestamp", None)
    for part in cast(list[dict[str, Any]], request["parts"]):
        part.pop("timestamp", None)
    return FrameworkMessage(role="user", text=text, framework_item=to_json(dumped).decode())


def tool_results_request(
    results: Sequence[tuple[ToolCallPart, str, ToolReturnOutcome]],
) -> ModelRequest:
    """A ``ModelRequest`` answering ``results``: one ``ToolReturnPart`` per call, in order."""
    return ModelRequest(
        parts=[
            ToolReturnPart(
                tool_name=call.tool_name,
                content=text,
                tool_call_id=call.tool_call_id,
                outcome=outcome,
            )
            for call, text, outcome in results
        ]
    )


def project_messages(messages: Iterable[ModelMessage]) -> list[FrameworkMessage]:
    """The session messages of ``messages``, in order; see ``project_message``."""
    projected: list[FrameworkMessage] = []
    for message in messages:
        projected.extend(project_message(message))
    return projected


def project_message(message: ModelMessage) -> list[FrameworkMessage]:
    """The session messages of one Pydantic AI message, with display fields.

    A response with tool calls gives one assistant message per call; a request
    with tool returns gives one tool message per return. The first of them
    carries the whole Pydantic AI message, the others ``EMPTY_FRAMEWORK_ITEM``.
    """
    item = encode_framework_item(message)
    if isinstance(message, ModelResponse):
        return _project_response(message, item)
    return _project_request(message, item)


def _project_response(response: ModelResponse, item: str) -> list[FrameworkMessage]:
    text = _joined(part.content for part in response.parts if isinstance(part, TextPart))
    calls = response.tool_calls
    if not calls:
        return [FrameworkMessage(role="assistant", text=text, framework_item=item)]
    return [
        FrameworkMessage(
            role="assistant",
            text=text if index == 0 else None,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            tool_arguments=call.args_as_json_str(),
            framework_item=item if index == 0 else EMPTY_FRAMEWORK_ITEM,
        )
        for index, call in enumerate(calls)
    ]


def _project_request(request: ModelRequest, item: str) -> list[FrameworkMessage]:
    returns = [part for part in request.parts if isinstance(part, ToolReturnPart)]
    # Retry feedback (Pydantic AI asking the model again) is shown like a prompt.
    prompt = _joined(
        _prompt_text(part) if isinstance(part, UserPromptPart) else part.model_response()
        for part in request.parts
        if isinstance(part, UserPromptPart | RetryFeedbackPart)
    )
    projected = [
        FrameworkMessage(
            role="tool",
            tool_call_id=part.tool_call_id,
            tool_name=part.tool_name,
            tool_output=part.model_response_str(wrap_if_error=False),
            framework_item=EMPTY_FRAMEWORK_ITEM,
        )
        for part in returns
    ]
    if prompt is not None or not projected:
        # A user prompt (possibly after tool returns) is shown as the user's message.
        projected.append(
            FrameworkMessage(role="user", text=prompt, framework_item=EMPTY_FRAMEWORK_ITEM)
        )
    first = projected[0]
    projected[0] = FrameworkMessage(
        role=first.role,
        text=first.text,
        tool_call_id=first.tool_call_id,
        tool_name=first.tool_name,
        tool_output=first.tool_output,
        framework_item=item,
    )
    return projected


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    texts = [content for content in part.content if isinstance(content, str)]
    return "\n".join(texts) if texts else "(non-text content)"


def _joined(texts: Iterable[str]) -> str | None:
    collected = [text for text in texts if text]
    return "".join(collected) if collected else None


# --- each session's history, kept per Worker ---------------------------------------
#
# Each session's model input, kept per Worker and extended as the session grows.
#
# Every model Step gives Pydantic AI the whole stored history. Even with each item
# decoded once per process (``decode_history``), copying every message and pairing
# every tool call again costs a Step more the longer the session is.
# ``SessionHistories`` keeps, per session, the paired history of the stored
# messages its last model Step read; the next Step of the session reuses it when
# its stored messages start with the same items (compared by their text, so a
# reused message is never stale) and decodes, copies and pairs only the messages
# stored since.
#
# The kept messages are the session's own copies, never shared with another
# session, and every run of the session gets them, as a plain caller's history
# is given to every run. Pydantic AI fills run metadata into, and adds parts to,
# the end of a run's history (the request after the last model response; 2.68 does
# so on its own copies, but the runner does not rely on that), so the messages from
# the last model response on are fresh copies on every Step and are never kept.

DEFAULT_KEPT_SESSIONS = 256
"""Sessions whose history a Worker keeps; the least recently used one goes first."""


@dataclass(frozen=True)
class _Kept:
    texts: tuple[str, ...]
    """The ``framework_item`` of each stored message the history covers, in order."""
    history: tuple[ModelMessage, ...]
    """Their paired history (``answer_orphaned_tool_calls``)."""


class SessionHistories:
    """The paired Pydantic AI history of each session's stored messages; see the comment above."""

    def __init__(self, max_sessions: int = DEFAULT_KEPT_SESSIONS) -> None:
        if max_sessions < 0:
            raise ValueError("max_sessions must not be negative")
        self.max_sessions = max_sessions
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()
        self.reused_messages = 0
        """Stored messages served from a kept history (for tests and benchmarks)."""

    def history(self, session_id: str, messages: Sequence[AgentMessage]) -> list[ModelMessage]:
        """``answer_orphaned_tool_calls(decode_history(messages))``, reusing what this
        session's previous Step decoded; the caller may change the list it gets."""
        texts = tuple(message.framework_item for message in messages)
        with self._lock:
            kept = self._kept.get(session_id)
        if kept is not None and texts[: len(kept.texts)] == kept.texts:
            history = self._build(session_id, messages, texts, kept)
            if history is not None:
                return history
        history = self._build(session_id, messages, texts, None)
        assert history is not None
        return history

    def _build(
        self,
        session_id: str,
        messages: Sequence[AgentMessage],
        texts: tuple[str, ...],
        kept: _Kept | None,
    ) -> list[ModelMessage] | None:
        """The history from ``kept`` and the messages after it; ``None`` when the end of
        the history, which Pydantic AI changes, would be a kept message."""
        reused = kept.history if kept is not None else ()
        start = len(kept.texts) if kept is not None else 0
        # One list per stored message, so the kept part ends at a stored message.
        fresh = [decode_history([message]) for message in messages[start:]]
        paired = answer_orphaned_tool_calls(
            [item for items in fresh for item in items],
            previous=reused[-1] if reused else None,
        )
        history = [*reused, *paired]
        tail = _last_response_index(history)
        if tail < len(reused):
            return None
        kept_texts, kept_messages = start, len(reused)
        for items in fresh:
            if kept_messages + len(items) > tail:
                break
            kept_messages += len(items)
            kept_texts += 1
        entry = _Kept(texts[:kept_texts], tuple(history[:kept_messages]))
        with self._lock:
            self.reused_messages += start
            self._kept[session_id] = entry
            self._kept.move_to_end(session_id)
            while len(self._kept) > self.max_sessions:
                self._kept.popitem(last=False)
        return history

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


def _last_response_index(history: Sequence[ModelMessage]) -> int:
    """The index of the last model response, or 0 when there is none."""
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index], ModelResponse):
            return index
    return 0
