"""Calibration maps (``council calibrate``): an isotonic map from a batch's verdict probabilities
to how often they were right, kept by name (docs/evaluation/batches.md, "Calibrated probabilities")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from council._util.clock import utc_now

if TYPE_CHECKING:
    from council.storage.connection import Backend


def save_calibration_map(
    store: Backend, name: str, *, batch_id: str, combine: str, items: int, points: Sequence[Sequence[float]]
) -> None:
    """Keep the map ``name`` (a new fit under a name replaces the old one)."""
    with store.immediate() as db:
        db.execute(
            "INSERT INTO calibration_maps (name, batch_id, combine, items, points, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET batch_id = excluded.batch_id,"
            " combine = excluded.combine, items = excluded.items, points = excluded.points,"
            " created_at = excluded.created_at",
            [name, batch_id, combine, items, json.dumps([list(p) for p in points]), utc_now()],
        )


def calibration_map(store: Backend, name: str) -> dict[str, Any] | None:
    """The map ``name``: ``name, batch_id, combine, items, points, created_at``; None if there is none."""
    row = store.db.execute(
        "SELECT name, batch_id, combine, items, points, created_at FROM calibration_maps WHERE name = ?", [name]
    ).fetchone()
    if row is None:
        return None
    found = dict(zip(("name", "batch_id", "combine", "items", "points", "created_at"), row, strict=True))
    found["points"] = json.loads(found["points"])
    return found
