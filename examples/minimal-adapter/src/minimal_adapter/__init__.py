"""A complete minimal dex-agents adapter; see the README and ``runner.py``."""

from minimal_adapter.runner import ChatRunner, ChatTool

__all__ = ["ChatRunner", "ChatTool"]
