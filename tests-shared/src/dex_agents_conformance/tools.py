"""The scenario tools the suite uses, one per effect."""

from __future__ import annotations

from dex_agents.testing import ScenarioTool
from dex_agents.values import ToolEffect

LOOKUP_ORDER = ScenarioTool(
    "lookup_order",
    ToolEffect.READ,
    description="Look up an order's delivery status.",
    text="order {order_id} shipped",
)
LOOKUP_STOCK = ScenarioTool(
    "lookup_stock",
    ToolEffect.READ,
    description="Look up whether an item is in stock.",
    text="{sku} in stock",
)
CHARGE_CARD = ScenarioTool(
    "charge_card",
    ToolEffect.NON_IDEMPOTENT_WRITE,
    description="Charge the customer's card.",
    text="charged {amount}",
)
"""Needs approval by default, as every non-idempotent write does."""
REFUND_ORDER = ScenarioTool(
    "refund_order",
    ToolEffect.IDEMPOTENT_WRITE,
    description="Refund an order; safe to repeat with the same idempotency key.",
    text="refunded {order_id}",
)
