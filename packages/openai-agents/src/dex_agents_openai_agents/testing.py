"""Test helpers for OpenAI Agents SDK agents: none of this package's own.

The SDK's own ``agents.testing.ScriptedModel`` is what an agent's tests use (see the
README's "Testing your agent"), with every step ``ModelStep.respond(reply)`` deciding
from the call's input, so that a rerun in another Worker process answers the same.
The suite's scripted model is ``ScenarioModel`` in ``dex_agents_openai_agents.conformance``.
"""
