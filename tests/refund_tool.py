"""The refund tool the approval tests gate: it notes each call it runs in `ran` (each
test module clears it before each test)."""

from __future__ import annotations

ran: list[tuple[str, int]] = []


def refund(order: str, amount: int) -> str:
    """Refund an order."""
    ran.append((order, amount))
    return f"refunded {amount} on {order}"
