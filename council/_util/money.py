"""Money as council shows it in messages and tables."""

from __future__ import annotations

__all__ = ["usd"]


def usd(amount: float) -> str:
    """Money as people read it: at least cents, more digits only where they matter."""
    text = f"{amount:.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"
