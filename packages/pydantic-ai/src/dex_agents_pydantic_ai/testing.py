"""Test helpers for Pydantic AI agents: none of this package's own.

Pydantic AI's own test models are what an agent's tests use (see "Testing your
agent" in docs/runners/pydantic-ai.md): ``FunctionModel(function)``, deciding from
the messages it is given so that a rerun in another Worker process answers the same,
or ``TestModel`` for smoke tests. The suite's scripted model is in
``dex_agents_pydantic_ai.conformance``.
"""
