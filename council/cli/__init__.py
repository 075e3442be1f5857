"""The ``council`` command (a front-end: it reaches the library through ``council.api`` only).

``main`` (the command group, its shared options and the entry point ``council.cli.main:main``),
one module per command group (``run``, ``sessions``, ``judge`` for compare and grade, ``batch``,
``worker``, ``bias_report``, ``leaderboard``, ``export``, ``cache``, ``store``, ``serve``,
``mcp``), and what they share: ``common`` (flags), ``progress`` (the live progress line),
``render`` (human output), ``views`` and ``show_parts`` (a session as people read it),
``reports`` (writing reports to files). Internal: its public face is the command line.
"""

__all__: list[str] = []
