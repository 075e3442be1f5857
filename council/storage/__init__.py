"""council.db: one store class, its migrations, and the judgment tables."""

from council.storage.store import Store

__all__ = ["Store"]
