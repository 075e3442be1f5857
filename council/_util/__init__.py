"""Internal plumbing shared by every package; nothing here is public API and any of it may change.

- ``background``: store work in worker threads beside the event loop (writes, reads on PostgreSQL).
- ``clock``: time as council stores and filters it (UTC ISO-8601 text, ``--since``).
- ``home``: the data directory, ``$COUNCIL_HOME``.
- ``html_parts``: what the self-contained HTML pages (bias report, leaderboard) are drawn with.
- ``lazy_exports``: a package's public names, imported when first asked for.
- ``logs``: log events; the library emits them, the host decides where they go.
- ``money``: dollar amounts as council shows them in messages and tables.
- ``money``: amounts of US dollars as messages show them.
- ``outputs``: writing the files users name (``-o FILE``), whole or not at all.
- ``refused_imports``: importing a library without the optional packages it would load.
- ``speedups``: every start-up and hot-path optimisation (import ahead, work beside the calls, the
  environment compared instead of decoded), each with what it saves and the benchmark measuring it.
"""

__all__: list[str] = []
