"""``framework_run_state``: the SDK's ``RunState`` JSON plus two counters of ours.

``stored_item_count`` is how many items of the run's input list are already
stored as messages, so the next step stores only what follows; and
``model_response_count`` is how many model responses the state already holds,
so usage counts only this step's responses (the SDK's counters are cumulative).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["RUN_STATE_FORMAT", "StepRunState", "decode_run_state", "encode_run_state"]

RUN_STATE_FORMAT = "dex-agents-openai-agents/1"


@dataclass(frozen=True)
class StepRunState:
    run_state: dict[str, Any]
    stored_item_count: int
    model_response_count: int


def encode_run_state(state: StepRunState) -> str:
    return json.dumps(
        {
            "format": RUN_STATE_FORMAT,
            "stored_item_count": state.stored_item_count,
            "model_response_count": state.model_response_count,
            "run_state": state.run_state,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_run_state(text: str) -> StepRunState:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"framework_run_state is not JSON: {error}") from error
    if not isinstance(data, dict) or cast(dict[str, Any], data).get("format") != RUN_STATE_FORMAT:
        raise ValueError(
            f"framework_run_state was not written by this adapter (expected {RUN_STATE_FORMAT})"
        )
    fields = cast(dict[str, Any], data)
    run_state = fields.get("run_state")
    stored = fields.get("stored_item_count")
    responses = fields.get("model_response_count")
    if not isinstance(run_state, dict) or type(stored) is not int or type(responses) is not int:
        raise ValueError("framework_run_state is missing its RunState or counters")
    return StepRunState(cast(dict[str, Any], run_state), stored, responses)
