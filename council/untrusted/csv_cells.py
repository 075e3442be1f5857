"""CSV cells that a spreadsheet shows as text: never a formula, numbers still numbers.

Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``, ``-`` or ``@``
(and after a tab or carriage return) as a formula, so a hostile answer or model name could
fetch a URL or run a command when an export is opened. Text cells starting with one of these
(or their full-width forms) get a leading ``'``, which spreadsheets hide and never evaluate
(OWASP, "CSV Injection"). Only text is escaped: ``-3`` written as a number stays a number for
pandas and DuckDB.
"""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = frozenset("=+-@\t\r＝＋－＠")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: ``None`` empty, booleans ``true``/``false``, formula-like text escaped."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value[:1] in FORMULA_STARTS:
        return "'" + value
    return value
