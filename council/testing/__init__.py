"""Test doubles that ship with the package: the council's deterministic fake replies
(``replies``), served in-process by the ``fake/`` provider and over HTTP by
``scripts/mock_llm_server.py``. Production code never reaches them except through ``fake/`` models.
Internal: nothing here is part of the public API."""

__all__: list[str] = []
