"""Bias auditing: per-session indicators, privacy-safe records, the cross-session report.

Diagnostic only — nothing here changes a score (docs/methods.md, "Bias audit"). ``stats``
holds the pure formulas, ``records`` the record schema, query hashing and per-session metadata,
``report`` the SQL cross-session report, ``html`` its self-contained HTML page and
``export`` the JSONL/CSV export.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "BiasRecord": "council.bias.records",
    "QueryHasher": "council.bias.records",
    "SessionBiasMetadata": "council.bias.records",
    "session_bias_metadata": "council.bias.records",
    "BiasReport": "council.bias.report",
    "bias_report": "council.bias.report",
    "report_from_records_files": "council.bias.report",
    "render_html": "council.bias.html",
    "export_bias_records": "council.bias.export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'council.bias' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
