"""Texts of the Stepwise loop that a model sees as tool results."""

from __future__ import annotations


def model_call_limit_result(limit: int) -> str:
    """Result of each tool call a model asked for after the turn's model call limit."""
    return f"The tool call was not run: this turn reached its limit of {limit} model calls."


def unknown_tool_error(tool_name: str) -> str:
    """Error of a call whose name is no offered tool."""
    return f"unknown tool {tool_name}"
