"""Bias auditing: per-session indicators, privacy-safe records, the cross-session report.

Diagnostic only — nothing here changes a score (docs/methods.md, "Bias audit"). The pure
formulas are in ``council.methods.bias_indicators``. Here: ``records`` the record schema and
per-session metadata, ``query_hash`` query hashing, ``report`` the cross-session report from the
store's sums, ``validation`` the record checks' findings as messages, ``loading`` record files
into a temporary store, ``foreign`` other tools' record formats, ``wording`` the findings in
words and the whole report as text (the CLI's, the MCP tool's), ``html`` the report's
self-contained HTML page and ``export`` the JSONL/CSV export.
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {
    "BiasRecord": "council.bias.records",
    "QueryHasher": "council.bias.query_hash",
    "SessionBiasMetadata": "council.bias.records",
    "session_bias_metadata": "council.bias.records",
    "BiasReport": "council.bias.report",
    "bias_report": "council.bias.report",
    "report_from_records_files": "council.bias.report",
    "render_html": "council.bias.html",
    "render_bias_report_text": "council.bias.wording",
    "export_bias_records": "council.bias.export",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
