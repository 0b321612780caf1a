"""Session options passed as keywords are typed: a misspelled one fails pyright and the call.

Every flow factory takes ``**session_options: Unpack[AgentSessionOptionValues]``;
the TypedDict must name exactly the fields of ``AgentSessionOptions``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import fields
from datetime import timedelta
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from dex_agents import AgentSessionOptions, AgentSessionOptionValues
from dex_agents.models import ScriptedModelClient
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow

REPOSITORY = Path(__file__).resolve().parents[3]


def test_the_keyword_types_name_every_option_and_nothing_else() -> None:
    assert set(get_type_hints(AgentSessionOptionValues)) == {
        option.name for option in fields(AgentSessionOptions)
    }


def test_a_misspelled_option_is_a_type_error_that_names_the_options() -> None:
    definition = AgentDefinition(
        name="a", instructions="Answer.", model=ScriptedModelClient(lambda request: "hi")
    )
    misspelled: dict[str, Any] = {"interupt_deadline": timedelta(hours=1)}
    with pytest.raises(TypeError, match=r"'interupt_deadline'.*interrupt_deadline"):
        create_stepwise_session_flow(definition, "Typo", **misspelled)
    flow = create_stepwise_session_flow(definition, "Fine", interrupt_deadline=timedelta(hours=1))
    assert flow.options.interrupt_deadline == timedelta(hours=1)


SNIPPET = """
from datetime import timedelta

from dex_agents import AgentFrameworkRunner, create_agent_session_flow
from dex_agents.models import ScriptedModelClient
from dex_agents.stepwise import AgentDefinition, create_stepwise_session_flow


def build(runner: AgentFrameworkRunner) -> None:
    create_agent_session_flow(runner, "A", interrupt_deadline=timedelta(hours=1))
    create_agent_session_flow(runner, "B", interupt_deadline=timedelta(hours=1))
    model = ScriptedModelClient(lambda request: "hi")
    definition = AgentDefinition(name="a", instructions="Answer.", model=model)
    create_stepwise_session_flow(definition, "C", default_tool_efect=None)
"""


@pytest.mark.slow
def test_pyright_strict_rejects_a_misspelled_option(tmp_path: Path) -> None:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    if pyright is None:
        pytest.skip("pyright is not installed in this environment")
    snippet = tmp_path / "options_snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    result = subprocess.run(
        [pyright, "--outputjson", str(snippet)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    report = json.loads(result.stdout)
    errors = {
        (item["range"]["start"]["line"] + 1, item["message"])
        for item in report["generalDiagnostics"]
        if item["severity"] == "error"
    }
    assert errors == {
        (11, 'No parameter named "interupt_deadline"'),
        (14, 'No parameter named "default_tool_efect"'),
    }


def test_the_core_factory_refuses_options_that_are_not_options() -> None:
    definition = AgentDefinition(
        name="a", instructions="Answer.", model=ScriptedModelClient(lambda request: "hi")
    )
    with pytest.raises(TypeError, match="options must be AgentSessionOptions"):
        create_stepwise_session_flow(definition, "X", {"interrupt_deadline": 1})  # type: ignore[arg-type]
