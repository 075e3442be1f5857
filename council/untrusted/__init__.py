"""Untrusted text: everything a user, a file, a provider or a model wrote passes through here.

- ``inputs``: text files and values users hand council, checked and decoded in one place.
- ``slots``: the only way untrusted text gets into a prompt (data, not instructions).
- ``lookalikes``: characters that read as a slot tag's (generated; do not edit).
- ``redaction``: secrets and private text kept out of everything stored, printed, logged or exported.
- ``terminal``: text on a terminal is shown, never obeyed.
- ``csv_cells``: CSV cells a spreadsheet shows as text, never as a formula.
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {
    "redact": "council.untrusted.redaction",
    "register_secret": "council.untrusted.redaction",
    "slot": "council.untrusted.slots",
    "visible": "council.untrusted.terminal",
    "csv_cell": "council.untrusted.csv_cells",
    "read_text_file": "council.untrusted.inputs",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
