"""A complete minimal dex-agents adapter; see the README and ``_runner.py``."""

from minimal_adapter._runner import ChatRunner, ChatTool

__all__ = ["ChatRunner", "ChatTool"]
