"""The demo's pretend shop: orders in a JSON file, and the function tools over them.

The file lives next to the demo's database, so refunds survive a restart of the
demo just like the session does.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from dex_agents._contract import ToolExecutionError
from dex_agents._values import ToolEffect
from dex_agents.stepwise import FunctionTool, ToolCallContext, function_tool

__all__ = ["Shop", "shop_tools"]

_INITIAL_ORDERS: dict[str, dict[str, Any]] = {
    "42": {"item": "espresso grinder", "total_eur": 129.0, "status": "delivered"},
    "43": {"item": "coffee beans, 1 kg", "total_eur": 24.5, "status": "shipped"},
    "44": {"item": "milk frother", "total_eur": 39.9, "status": "processing"},
}


class Shop:
    """Orders and refunds, stored in ``path``; safe to use from parallel tool Steps."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"orders": json.loads(json.dumps(_INITIAL_ORDERS)), "refunds": {}}
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2), encoding="utf-8")
        temporary.replace(self.path)

    def orders(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            orders: dict[str, dict[str, Any]] = self._load()["orders"]
            return orders

    def refund(self, order_id: str, reason: str, idempotency_key: str) -> dict[str, Any]:
        """Refund ``order_id`` once; a repeat with the same key returns the first refund."""
        with self._lock:
            data = self._load()
            refunds: dict[str, dict[str, Any]] = data["refunds"]
            if idempotency_key in refunds:
                return refunds[idempotency_key]
            order = data["orders"].get(order_id)
            if order is None:
                raise ToolExecutionError(f"there is no order {order_id}")
            if order["status"] == "refunded":
                raise ToolExecutionError(f"order {order_id} was refunded already")
            order["status"] = "refunded"
            refund = {
                "refund_id": f"R-{len(refunds) + 1:04d}",
                "order_id": order_id,
                "amount_eur": order["total_eur"],
                "reason": reason,
            }
            refunds[idempotency_key] = refund
            self._save(data)
            return refund


def shop_tools(shop: Shop) -> list[FunctionTool]:
    """The demo agent's function tools: two reads and a write that needs approval."""

    @function_tool(effect=ToolEffect.READ)
    def list_orders() -> dict[str, dict[str, Any]]:
        """List the customer's orders with their item, total and status."""
        return shop.orders()

    @function_tool(effect=ToolEffect.READ)
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up one order by its ID (for example "42")."""
        order = shop.orders().get(order_id)
        if order is None:
            raise ToolExecutionError(f"there is no order {order_id}")
        return {"order_id": order_id, **order}

    @function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    def refund_order(order_id: str, reason: str, context: ToolCallContext) -> dict[str, Any]:
        """Refund an order in full. The user must approve each refund."""
        return shop.refund(order_id, reason, context.idempotency_key)

    return [list_orders, lookup_order, refund_order]
