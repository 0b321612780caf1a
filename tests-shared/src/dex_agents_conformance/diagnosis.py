"""Reading why a scenario failed: runner defects by rule, and tracebacks in Worker logs."""

from __future__ import annotations

from pathlib import Path

from dex_agents_conformance.rules import ContractRule

TRACEBACK_START = "Traceback (most recent call last):"
TRACEBACK_TAIL_LINES = 12
_CHAIN_MARKERS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)

# Phrases of the session's RunnerDefectError messages, by the rule each one breaks.
_DEFECTS: tuple[tuple[str, ContractRule], ...] = (
    ("framework_run_state", ContractRule.RUN_STATE),
    ("already has a record", ContractRule.UNIQUE_TOOL_CALL_IDS),
    ("appears twice in one turn", ContractRule.UNIQUE_TOOL_CALL_IDS),
    ("empty tool call ID", ContractRule.TOOL_CALL_IDS),
    ("tool call IDs must not contain", ContractRule.TOOL_CALL_IDS),
)

DEFECT_RULES = frozenset(rule for _, rule in _DEFECTS)
"""Rules whose break the session itself reports, as a runner defect."""


def defect_rule(message: str) -> ContractRule | None:
    """The rule a runner defect message (``RunnerDefectError``) names, if it is one."""
    if "runner defect" not in message:
        return None
    for phrase, rule in _DEFECTS:
        if phrase in message:
            return rule
    return None


def failure_summary(failure: str, limit: int = 600) -> str:
    """The first line of a failed Step attempt's failure as the engine stores it.

    The engine keeps the exception and its traceback as one quoted text in the
    failure's fields; its first line names the exception (the Worker log has the rest).
    """
    quote = failure.find('"')
    body = failure[quote + 1 :] if quote >= 0 else failure
    first = body.split("\\n", 1)[0].split("\n", 1)[0].strip().rstrip('"')
    return first if len(first) <= limit else first[:limit] + "..."


def last_traceback(log: Path, lines: int = TRACEBACK_TAIL_LINES) -> list[str]:
    """The tail of the last failure in a Worker log (``[]`` if none).

    When the last traceback ends a chain ("The above exception was the direct
    cause..."), the chain's first traceback is shown: it holds the runner's own
    frames and exception, and the wrappers after it add nothing.
    """
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    start = text.rfind(TRACEBACK_START)
    while start > 0 and text[:start].rstrip().endswith(_CHAIN_MARKERS):
        previous = text.rfind(TRACEBACK_START, 0, start)
        if previous < 0:
            break
        start = previous
    if start < 0:
        return []
    block = text[start:].splitlines()
    # The traceback ends at its exception line: the first line after it that is not indented.
    end = len(block)
    for index, line in enumerate(block[1:], start=1):
        if line and not line.startswith(" "):
            end = index + 1
            break
    block = block[:end]
    return block if len(block) <= lines else ["...", *block[-lines:]]
