"""Whether a model takes a forced tool choice, for ``planning_tool_choice="required"``.

``required`` forces a tool call (``write_todos``) on a planning turn's first model call.
Some models refuse a forced tool choice and fail every attempt of that call: Claude Opus
5.5, Claude Sonnet 5.5, and any Anthropic model with extended thinking on. Runners check
the model when the agent is built (``check_planning_tool_choice``), and a model chosen per
session when a turn forces the call, so the mistake shows as one clear error instead of
a provider error on every attempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "FORCED_TOOL_CHOICE_REFUSING_MODELS",
    "check_planning_tool_choice",
    "forced_tool_choice_refusal",
    "is_anthropic_model",
    "thinking_enabled",
]

FORCED_TOOL_CHOICE_REFUSING_MODELS = ("claude-opus-5-5", "claude-sonnet-5-5")
"""Model ID prefixes (dots read as hyphens) of models that refuse a forced tool choice."""

_REFUSING_MODEL = re.compile(
    r"(?:^|[^a-z0-9])(?:"
    + "|".join(re.escape(prefix) for prefix in FORCED_TOOL_CHOICE_REFUSING_MODELS)
    + r")(?:$|[-@:])"
)


_THINKING_OFF = frozenset({"disabled", "off", "none", "false"})


def thinking_enabled(options: Mapping[str, Any] | None) -> bool:
    """Whether settings or provider options turn thinking on: ``thinking`` or
    ``anthropic_thinking`` as a mapping with a ``type`` other than ``disabled``, ``True``,
    or an effort level such as ``"high"``. Whether that is Anthropic extended thinking
    depends on the model."""
    if not options:
        return False
    for key in ("thinking", "anthropic_thinking"):
        value = options.get(key)
        if isinstance(value, Mapping):
            kind = value.get("type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if kind is not None and kind != "disabled":
                return True
        elif value is True or (isinstance(value, str) and value.lower() not in _THINKING_OFF):
            return True
    return False


def is_anthropic_model(model: str | None, provider: str | None = None) -> bool:
    """Whether ``model`` (an ID, optionally ``anthropic:``/``anthropic/``-prefixed) or
    ``provider`` names an Anthropic model."""
    if provider is not None and provider.lower() == "anthropic":
        return True
    name = (model or "").lower()
    return name.startswith(("anthropic:", "anthropic/")) or "claude" in name


def forced_tool_choice_refusal(model: str | None, *, extended_thinking: bool = False) -> str | None:
    """Why ``model`` refuses a forced tool choice, or ``None`` when it is not known to.

    ``model`` is a model ID, optionally with a provider prefix (``anthropic:``,
    ``anthropic/``); ``extended_thinking`` says whether the call turns Anthropic extended
    thinking on.
    """
    if extended_thinking:
        return "Anthropic extended thinking refuses a forced tool choice"
    if not model:
        return None
    # Provider prefixes ("anthropic:", "anthropic/"), a cloud's region and vendor parts
    # ("us.anthropic.", Bedrock) and version suffixes ("-v1:0", "@latest", a date) may
    # surround the model's own name, so it is found as a whole hyphenated part.
    name = model.strip().lower().replace(".", "-")
    if _REFUSING_MODEL.search(name):
        return f"model {model} refuses a forced tool choice"
    return None


def check_planning_tool_choice(
    planning_tool_choice: str, refusal: str | None, *, where: str
) -> None:
    """Raise ``ValueError`` when ``planning_tool_choice`` is ``required`` and the model
    refuses a forced tool choice (``refusal``, from ``forced_tool_choice_refusal``)."""
    if planning_tool_choice not in ("auto", "required"):
        raise ValueError(f"{where}: planning_tool_choice must be 'auto' or 'required'")
    if planning_tool_choice == "required" and refusal is not None:
        raise ValueError(
            f"{where}: planning_tool_choice='required' forces a tool call on a planning"
            f" turn's first model call, but {refusal}, which would fail every attempt of"
            " that call; use planning_tool_choice='auto' (the plan note asks for write_todos)"
            " or a model that takes a forced tool choice"
        )
