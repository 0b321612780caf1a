"""Deprecated: ``dex_agents.stepwise.compaction`` is private now (``_compaction``).

Its functions serve ``StepwiseRunner``; this module goes in the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents.stepwise import _compaction

if TYPE_CHECKING:
    from dex_agents.stepwise._compaction import cut_items as cut_items
    from dex_agents.stepwise._compaction import cut_points as cut_points
    from dex_agents.stepwise._compaction import estimate_item_tokens as estimate_item_tokens
    from dex_agents.stepwise._compaction import estimate_request_tokens as estimate_request_tokens
    from dex_agents.stepwise._compaction import select_cut as select_cut
    from dex_agents.stepwise._compaction import summary_note as summary_note
    from dex_agents.stepwise._compaction import trim_summary_items as trim_summary_items

__getattr__ = deprecated_aliases(
    __name__,
    {
        name: (f"the private dex_agents.stepwise._compaction.{name}", getattr(_compaction, name))
        for name in _compaction.__all__
    },
)
