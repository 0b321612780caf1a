"""Failures name their rule once, and the diagnosis reads runner defects and Worker logs."""

from pathlib import Path

import pytest

from dex_agents_conformance.diagnosis import defect_rule, failure_summary, last_traceback
from dex_agents_conformance.rules import ContractRule, checking, contract_rule, rules_of


async def test_a_scenario_names_its_rule_and_an_inner_check_names_its_own_first() -> None:
    @contract_rule(ContractRule.APPROVALS)
    async def scenario() -> None:
        with checking(ContractRule.USAGE):
            raise AssertionError("3 != 6")

    assert rules_of(scenario) == (ContractRule.APPROVALS,)
    with pytest.raises(AssertionError, match="contract rule usage") as failure:
        await scenario()
    assert failure.value.__notes__ == [ContractRule.USAGE.note(), ContractRule.APPROVALS.note()]


def test_every_rule_says_what_it_asks() -> None:
    for rule in ContractRule:
        assert rule.note().startswith(f"contract rule {rule.value}: ")
        assert len(rule.description) > 20


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        (
            "runner defect: ToolCallsRequested.framework_run_state must be non-empty text",
            ContractRule.RUN_STATE,
        ),
        (
            "runner defect: tool call 'call-0' already has a record in this turn",
            ContractRule.UNIQUE_TOOL_CALL_IDS,
        ),
        ("runner defect: tool call 0 ('x') has an empty tool call ID", ContractRule.TOOL_CALL_IDS),
        ("ScriptedModelFailure: scripted model call 2 failed", None),
        ("runner defect: something new", None),
    ],
)
def test_a_runner_defect_names_the_rule_it_breaks(message: str, rule: ContractRule | None) -> None:
    assert defect_rule(message) is rule


def test_a_failure_summary_is_the_first_line_of_the_engine_s_failure_text() -> None:
    failure = (
        'message: "ValueError: bad\\n\\nTraceback (most recent call last):\\n ..."\nattempt: 3'
    )
    assert failure_summary(failure) == "ValueError: bad"
    assert failure_summary("x" * 700).endswith("...")


def test_the_traceback_tail_is_the_first_of_the_last_chain(tmp_path: Path) -> None:
    log = tmp_path / "worker-1.log"
    log.write_text(
        "ready\n"
        "Traceback (most recent call last):\n"
        '  File "old.py", line 1, in f\n'
        "KeyError: 'an earlier failure'\n"
        "Traceback (most recent call last):\n"
        '  File "my_adapter/runner.py", line 88, in run_model_step\n'
        "    model_call_metadata(request_modle='x')\n"
        "TypeError: model_call_metadata() got an unexpected keyword argument 'request_modle'\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "dex/_pull_worker.py", line 691, in _execute\n'
        "dex.runtime_errors.StepError: wrapped\n"
        "later log line\n"
    )
    assert last_traceback(log) == [
        "Traceback (most recent call last):",
        '  File "my_adapter/runner.py", line 88, in run_model_step',
        "    model_call_metadata(request_modle='x')",
        "TypeError: model_call_metadata() got an unexpected keyword argument 'request_modle'",
    ]
    assert last_traceback(log, lines=2) == [
        "...",
        "    model_call_metadata(request_modle='x')",
        "TypeError: model_call_metadata() got an unexpected keyword argument 'request_modle'",
    ]
    assert last_traceback(tmp_path / "missing.log") == []
