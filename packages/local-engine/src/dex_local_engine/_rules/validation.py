"""Checks of what callers and Workers send, as Dex Server makes them."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from dex.dexpb import dex_pb2 as pb

from dex_local_engine._rules import errors
from dex_local_engine._rules.conditions import validate_waiting_condition
from dex_local_engine._rules.errors import DexError
from dex_local_engine._rules.retry import effective_retry_policy


def validate_step_options(options: pb.StepOptions) -> None:
    """Reject StepOptions Dex would reject (bad retry policies), as INVALID_ARGUMENT."""
    try:
        for field in ("wait_for_retry_policy", "execute_retry_policy"):
            if options.HasField(field):
                effective_retry_policy(getattr(options, field))
        if options.HasField("execute_failure_proceed_step_options"):
            validate_step_options(options.execute_failure_proceed_step_options)
    except ValueError as error:
        raise errors.invalid(f"invalid StepOptions: {error}") from None


def result_problem(
    frame: pb.PollWorkerTaskFrame, attribute_stores: Collection[str] = ()
) -> str | None:
    """Why a Step method result cannot be applied, or None when it can (``attribute_stores``:
    the Attribute Store names the engine knows, for SubFlow configurations)."""
    try:
        if frame.WhichOneof("output") == "wait_for":
            result = frame.wait_for.result
            if result.HasField("waiting_condition"):
                validate_waiting_condition(result.waiting_condition)
                for sub_flow in result.waiting_condition.sub_flow_conditions:
                    validate_step_options(sub_flow.step_options)
                    validate_flow_config(sub_flow.options.flow_config_override, attribute_stores)
        else:
            for movement in frame.execute.result.step_decision.next_steps:
                if not movement.step_type:
                    return "a Step movement has no step_type"
                validate_step_options(movement.step_options)
    except DexError as error:
        return error.detail
    except ValueError as error:
        return str(error)
    return None


def options_proceed_on_wait_for_failure(options: pb.StepOptions) -> bool:
    """Whether a failed wait_for goes on to execute instead of failing the Flow."""
    return options.wait_for_failure_policy == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE


def trusted_movements(movements: Iterable[pb.StepMovement]) -> list[pb.StepMovement]:
    """Movements with the fields only the engine may set cleared."""
    cleaned: list[pb.StepMovement] = []
    for movement in movements:
        copy = pb.StepMovement()
        copy.CopyFrom(movement)
        copy.ClearField("from_step_execution_id_internal_only")
        copy.ClearField("recovery_error_internal_only")
        cleaned.append(copy)
    return cleaned


def validate_flow_config(config: pb.FlowConfig, attribute_stores: Collection[str] = ()) -> None:
    """Refuse a Flow configuration Dex Server would refuse, as INVALID_ARGUMENT.

    As on Dex Server, an Attribute Store the engine was not configured with is unknown
    (``attribute_stores`` are the names it knows; one started without any knows none):
    a silently ignored projection would lose writes.
    """
    if config.continue_as_new_threshold < 0:
        raise errors.invalid(
            f"continue_as_new_threshold must be >= 0, got {config.continue_as_new_threshold}"
        )
    if config.continue_as_new_page_size_in_bytes < 0:
        raise errors.invalid(
            "continue_as_new_page_size_in_bytes must be >= 0, got "
            f"{config.continue_as_new_page_size_in_bytes}"
        )
    for name in config.attribute_store_names.names:
        if name and name not in attribute_stores:
            raise errors.invalid(f"unknown Attribute Store {name!r}")
