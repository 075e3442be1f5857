"""Spend caps kept in the store: the ledger of a batch's budget (docs/methods.md, "Spend caps").

A budget row holds the cap and what was spent; each call in flight holds a reservation
row with its worst case. A reservation is taken in one ``BEGIN IMMEDIATE`` transaction
that sums the spent and reserved amounts first, so processes sharing the store can never
together reserve past the cap. A reservation left by a process that died is moved into
the spent amount when the budget is next opened (the call may have been billed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from council._util.clock import utc_now
from council.storage.ownership import SQLITE_CLOCK, dead

if TYPE_CHECKING:
    from council.storage.connection import Backend


def batch_spent(store: Backend, batch_id: str) -> float:
    """What the calls of a batch's recorded items cost."""
    rows = store.db.execute(
        "SELECT coalesce(sum(c.cost_usd), 0) FROM calls c JOIN batch_items b ON c.session_id = b.run_id"
        " WHERE b.batch_id = ? AND c.ok = 1",
        [batch_id],
    ).fetchall()
    return float(rows[0][0])


def open_budget(store: Backend, key: str, *, cap_usd: float | None, spent_usd: float = 0.0) -> float | None:
    """Set the cap of ``key`` (``cap_usd``; a new cap replaces the old one) or read it (None).
    A new budget starts at ``spent_usd``. Returns the cap in force (None: no budget)."""
    with store.immediate() as db:
        # A reservation whose owner's lease has expired: the call may have been billed.
        gone = f"key = ? AND owner IS NOT NULL AND {dead('budget_reservations.owner', SQLITE_CLOCK)}"
        lost = db.execute(f"SELECT coalesce(sum(amount_usd), 0) FROM budget_reservations WHERE {gone}", [key])
        lost = lost.fetchone()[0]
        db.execute(f"DELETE FROM budget_reservations WHERE {gone}", [key])
        if lost:
            db.execute("UPDATE budgets SET spent_usd = spent_usd + ? WHERE key = ?", [lost, key])
        row = db.execute("SELECT cap_usd FROM budgets WHERE key = ?", [key]).fetchone()
        if cap_usd is None:
            return None if row is None else float(row[0])
        if row is None:
            db.execute(
                "INSERT INTO budgets (key, cap_usd, spent_usd, updated_at) VALUES (?, ?, ?, ?)",
                [key, cap_usd, spent_usd, utc_now()],
            )
        else:
            db.execute("UPDATE budgets SET cap_usd = ?, updated_at = ? WHERE key = ?", [cap_usd, utc_now(), key])
    return cap_usd


def reserve_budget(store: Backend, key: str, amount_usd: float) -> tuple[int | None, float, float]:
    """Reserve ``amount_usd`` if spent + reserved + it stays within the cap: (the reservation's
    id, or None when refused; spent; cap)."""
    owner = store._owner().get("owner")
    with store.immediate() as db:
        cap, spent = db.execute("SELECT cap_usd, spent_usd FROM budgets WHERE key = ?", [key]).fetchone()
        reserved = db.execute(
            "SELECT coalesce(sum(amount_usd), 0) FROM budget_reservations WHERE key = ?", [key]
        ).fetchone()[0]
        if spent + reserved + amount_usd > cap:
            return None, float(spent), float(cap)
        cursor = db.execute(
            "INSERT INTO budget_reservations (key, amount_usd, owner, created_at) VALUES (?, ?, ?, ?)",
            [key, amount_usd, owner, utc_now()],
        )
        return int(cursor.lastrowid), float(spent), float(cap)


def settle_budget(store: Backend, key: str, reservation: int, actual_usd: float) -> None:
    """End a reservation: ``actual_usd`` was spent."""
    with store.immediate() as db:
        db.execute("DELETE FROM budget_reservations WHERE id = ?", [reservation])
        db.execute("UPDATE budgets SET spent_usd = spent_usd + ?, updated_at = ? WHERE key = ?",
                   [actual_usd, utc_now(), key])  # fmt: skip


def shrink_budget(store: Backend, key: str, reservation: int, amount_usd: float) -> None:
    """Hold ``amount_usd`` for a reservation still in use, less than it held: the rest is free
    again for every process sharing the budget (council.accounting.budget.Tranches gives back what it
    reserved ahead and did not draw)."""
    with store.immediate() as db:
        db.execute("UPDATE budget_reservations SET amount_usd = ? WHERE id = ? AND key = ? AND amount_usd > ?",
                   [amount_usd, reservation, key, amount_usd])  # fmt: skip


def budget_totals(store: Backend, key: str) -> tuple[float, float]:
    """(spent, cap) of ``key``."""
    row: Any = store.db.execute("SELECT spent_usd, cap_usd FROM budgets WHERE key = ?", [key]).fetchone()
    return float(row[0]), float(row[1])
