"""Test helpers for OpenAI Agents SDK agents: a scripted model that is durable.

The SDK's ``agents.testing.ScriptedModel`` plays a queue of steps, and that queue starts
again from the top in every Worker process: after a Worker restart, or with two Workers,
it gives the first answer again. ``RespondingModel`` is the durable form: it answers
every call with ``ModelStep.respond(reply)``, where ``reply(call)`` decides from the
call's input alone, so a rerun in another Worker process answers the same. The suite's
scripted model is ``ScenarioModel`` in ``dex_agents_openai_agents.conformance``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from agents.items import ModelResponse, TResponseStreamEvent
from agents.testing import ModelCall, ModelStep, ScriptedModel

__all__ = ["RespondingModel"]


class RespondingModel(ScriptedModel):
    """A ``ScriptedModel`` that answers every call with ``reply(call)``, from the call's
    input alone, however many calls come and in whichever Worker process.

    ``reply`` returns the ``ModelStep`` of one call (``ModelStep(output=[...])`` with the
    SDK's ``assistant_message`` and ``function_call`` helpers). Give the agent this model
    in tests, or in an application that must run without a model key.
    """

    def __init__(self, reply: Callable[[ModelCall], ModelStep]) -> None:
        super().__init__()
        self.reply = reply
        """Decides one call's answer from its ``ModelCall`` (its ``input`` and tools)."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """One step answered by ``reply``, for a non-streaming call."""
        self.enqueue(ModelStep.respond(self.reply))
        return await super().get_response(*args, **kwargs)

    async def stream_response(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """One step answered by ``reply``, streamed (the runner always streams)."""
        self.enqueue(ModelStep.respond(self.reply))
        async for event in super().stream_response(*args, **kwargs):
            yield event
