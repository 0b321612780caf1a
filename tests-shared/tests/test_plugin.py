"""The plugin as an adapter maintainer uses it: a fresh project, one fixture, one subclass."""

import textwrap

import pytest

from dex_agents_conformance import ConformanceAdapter

pytest_plugins = ("pytester",)

ADAPTER_TESTS = textwrap.dedent(
    """
    import pytest

    from dex_agents.testing import SCRIPTED_FLOW_FACTORY
    from dex_agents_conformance import ConformanceAdapter
    from dex_agents_conformance.suite import ConformanceSuite


    @pytest.fixture
    def conformance_adapter():
        return ConformanceAdapter(
            factory=SCRIPTED_FLOW_FACTORY, name="limited runner", capabilities=frozenset()
        )


    class TestLimitedRunner(ConformanceSuite):
        pass
    """
)


def test_the_suite_runs_in_a_project_without_config_and_skips_missing_capabilities(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_conformance_limited=ADAPTER_TESTS)
    result = pytester.runpytest_subprocess(
        "-m", "conformance", "-k", "parallel or sibling or two_interrupts or paging", "-rs"
    )
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*limited runner does not support parallel_tool_calls*"])


def test_an_adapter_fixture_of_the_wrong_type_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_conformance_wrong=textwrap.dedent(
            """
            import pytest
            from dex_agents_conformance.suite import ConformanceSuite

            @pytest.fixture
            def conformance_adapter():
                return "my_adapter.conformance:build_flow"

            class TestWrong(ConformanceSuite):
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess("-k", "paging")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*must return a ConformanceAdapter*"])


def test_an_adapter_names_its_factory_by_import_path() -> None:
    with pytest.raises(ValueError, match="module:function"):
        ConformanceAdapter(factory="my_adapter.build_flow")


def test_a_failure_names_the_rule_and_shows_the_runner_error_and_the_worker_log(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_conformance_broken=textwrap.dedent(
            """
            import pytest
            from dex_agents_conformance import ConformanceAdapter
            from dex_agents_conformance.suite import ConformanceSuite

            @pytest.fixture
            def conformance_adapter():
                return ConformanceAdapter(
                    factory="dex_agents_conformance.mutants:build_empty_run_state",
                    name="broken runner",
                )

            class TestBroken(ConformanceSuite):
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess("-m", "conformance", "-k", "two_tool_rounds")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*contract rule run_state: ToolCallsRequested carries a non-empty framework_run_state*",
            "*last_turn_error: *runner defect*",
            "*Worker log: */worker-1.log",
            "*dex_agents.runner.RunnerDefectError: runner defect*",
        ]
    )


def test_a_project_configured_as_the_readme_says_runs_without_warnings(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_conformance_limited=ADAPTER_TESTS)
    pytester.makepyprojecttoml(
        textwrap.dedent(
            """
            [tool.pytest.ini_options]
            asyncio_mode = "auto"
            asyncio_default_fixture_loop_scope = "function"
            """
        )
    )
    result = pytester.runpytest_subprocess("-m", "conformance", "-k", "paging")
    result.assert_outcomes(passed=1, warnings=0)


def test_a_skip_names_the_reason_an_adapter_declares(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_conformance_declared=textwrap.dedent(
            """
            import pytest

            from dex_agents.testing import SCRIPTED_FLOW_FACTORY
            from dex_agents_conformance import ALL_CAPABILITIES, Capability, ConformanceAdapter
            from dex_agents_conformance.suite import ConformanceSuite


            @pytest.fixture
            def conformance_adapter():
                return ConformanceAdapter(
                    factory=SCRIPTED_FLOW_FACTORY,
                    name="declaring runner",
                    capabilities=ALL_CAPABILITIES,
                    unsupported={Capability.SESSION_MODELS: "one model per Worker"},
                )


            class TestDeclaringRunner(ConformanceSuite):
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess("-m", "conformance", "-k", "choose_the_model", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*declaring runner does not support session_models (one model per Worker)*"]
    )


def test_a_capability_is_declared_either_supported_or_unsupported() -> None:
    from dex_agents_conformance import Capability

    with pytest.raises(ValueError, match="both in capabilities and unsupported"):
        ConformanceAdapter(
            factory="my_adapter.conformance:build_flow",
            capabilities=frozenset({Capability.PLAN_MODE}),
            unsupported={Capability.PLAN_MODE: "no"},
        )
    with pytest.raises(ValueError, match="must be text"):
        ConformanceAdapter(
            factory="my_adapter.conformance:build_flow",
            capabilities=frozenset(),
            unsupported={Capability.PLAN_MODE: " "},
        )
