"""The suite can fail: each deliberately broken runner fails it, naming the rule it breaks.

One engine serves the module (the plugin's ``conformance_engine``); each mutant runs
the scenario of its rule through the same harness the suite uses.
"""

import inspect
from pathlib import Path

import pytest

from dex_agents.testing import SCRIPTED_FLOW_FACTORY, PrivateDexEngine
from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
from dex_agents_conformance.diagnosis import DEFECT_RULES
from dex_agents_conformance.harness import ConformanceHarness
from dex_agents_conformance.mutants import INCREMENTAL_FLOW_FACTORY, MUTANTS, Mutant
from dex_agents_conformance.rules import RULE_NOTE_PREFIX, ContractRule, rules_of
from dex_agents_conformance.suite import ConformanceSuite

CAPABILITIES = ALL_CAPABILITIES | {
    Capability.TOOL_INPUT_REQUESTS,
    Capability.PLANNING_TOOL_CHOICE,
    Capability.SESSION_MODELS,
    Capability.MCP_TOOLS,
}
FAILED_TURN = "test_a_failed_model_call_fails_the_turn_with_a_note_of_the_tool_calls"


def _harness(
    factory: str, name: str, engine: PrivateDexEngine, tmp_path: Path
) -> ConformanceHarness:
    adapter = ConformanceAdapter(factory=factory, name=name, capabilities=CAPABILITIES)
    return ConformanceHarness(adapter, engine, tmp_path)


async def _run_scenario(scenario_name: str, harness: ConformanceHarness) -> None:
    scenario = getattr(ConformanceSuite(), scenario_name)
    await scenario(conformance_harness=harness)


def test_every_mutant_breaks_another_rule_and_names_a_scenario_of_the_suite() -> None:
    rules = [mutant.rule for mutant in MUTANTS]
    assert len(set(rules)) == len(rules)
    for mutant in MUTANTS:
        scenario = getattr(ConformanceSuite, mutant.scenario)
        # The scenario checks the rule throughout, or names it around the rule's check.
        source = inspect.getsource(scenario)
        checked = (
            f"checking(ContractRule.{mutant.rule.name})" in source
            or (mutant.rule in DEFECT_RULES and "assert_turn_succeeded(" in source)
            or mutant.rule is ContractRule.FLOW_TYPE  # the harness checks it in every scenario
        )
        assert rules_of(scenario) == (mutant.rule,) or checked, mutant


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda mutant: mutant.name)
async def test_the_suite_fails_a_runner_that_breaks_a_rule_and_names_the_rule(
    mutant: Mutant, conformance_engine: PrivateDexEngine, tmp_path: Path
) -> None:
    harness = _harness(mutant.factory, mutant.name, conformance_engine, tmp_path)
    with pytest.raises(Exception) as failure:
        await _run_scenario(mutant.scenario, harness)
    notes: list[str] = getattr(failure.value, "__notes__", [])
    named = [note for note in notes if note.startswith(RULE_NOTE_PREFIX)]
    assert named, f"no contract rule named in {failure.value!r} {notes}"
    assert named[0] == mutant.rule.note(), f"{mutant.name} failed as {named[0]!r}: {failure.value}"


@pytest.mark.parametrize(
    ("factory", "scenario"),
    [
        (SCRIPTED_FLOW_FACTORY, "test_contract_rules_of_a_turn_with_two_tool_rounds"),
        (INCREMENTAL_FLOW_FACTORY, "test_contract_rules_of_a_turn_with_two_tool_rounds"),
        (
            INCREMENTAL_FLOW_FACTORY,
            "test_a_failed_model_call_fails_the_turn_with_a_note_of_the_tool_calls",
        ),
    ],
    ids=["scripted-two-rounds", "incremental-two-rounds", "incremental-unfinished-turn"],
)
async def test_the_correct_runners_pass_the_scenarios_the_mutants_fail(
    factory: str, scenario: str, conformance_engine: PrivateDexEngine, tmp_path: Path
) -> None:
    await _run_scenario(scenario, _harness(factory, "control", conformance_engine, tmp_path))


async def test_a_failure_carries_the_turn_error_the_failed_steps_and_the_worker_log(
    conformance_engine: PrivateDexEngine, tmp_path: Path
) -> None:
    [mutant] = [m for m in MUTANTS if m.rule is ContractRule.RUN_STATE]
    harness = _harness(mutant.factory, mutant.name, conformance_engine, tmp_path)
    with pytest.raises(AssertionError) as failure:
        await _run_scenario(mutant.scenario, harness)
    [diagnosis] = [n for n in failure.value.__notes__ if n.startswith("what the session says")]
    [turn_error] = [line for line in diagnosis.splitlines() if "last_turn_error:" in line]
    assert "runner defect: ToolCallsRequested.framework_run_state" in turn_error
    assert "dex_agents.runner.RunnerDefectError: runner defect" in diagnosis, "the traceback tail"
    assert "RunModel (execute) failed on attempt" in diagnosis
    assert f"that runner defect breaks {ContractRule.RUN_STATE.note()}" in diagnosis
    [log_line] = [line for line in diagnosis.splitlines() if "Worker log:" in line]
    assert log_line.endswith("worker-1.log")
    assert log_line.split("Worker log: ", 1)[1].startswith(str(tmp_path))
