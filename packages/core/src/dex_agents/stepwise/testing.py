"""What a Stepwise agent's own tests use: the scripted model client.

``ScriptedModelClient(reply)`` is a real ``ModelClient`` whose ``reply(request)``
decides each answer from the request it gets (``ScriptedModelReply`` with text or
``ScriptedToolCall``s), so a rerun in another Worker process answers the same.
They are the same objects as in ``dex_agents.models``; the conformance suite's
scenario factory is in ``dex_agents.stepwise.conformance``.
"""

from __future__ import annotations

from dex_agents.models import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedModelScript,
    ScriptedToolCall,
)

__all__ = ["ScriptedModelClient", "ScriptedModelReply", "ScriptedModelScript", "ScriptedToolCall"]
