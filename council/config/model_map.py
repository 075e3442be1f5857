"""LiteLLM's model map, read without importing LiteLLM.

LiteLLM ships its model map (prices, limits, and the provider each model is filed under) as a
JSON file inside the package (``model_prices_and_context_window_backup.json``). This module
finds that file (``importlib.util.find_spec`` only locates the package) and reads it once, on
the first lookup: for prices and limits on the native transport (council.providers.prices), and
for the provider a bare model name belongs to when a config names none (council.config.endpoints).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

PRICE_MAP_FILE = "model_prices_and_context_window_backup.json"

_map: dict[str, Any] | None = None
_lock = threading.Lock()


def price_map_path() -> Path | None:
    """The map inside the installed LiteLLM package, or None (LiteLLM is not imported)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / PRICE_MAP_FILE
        if path.is_file():
            return path
    return None


def price_map() -> dict[str, Any]:
    """The whole map, read once per process ({} when LiteLLM or its file is missing)."""
    global _map
    if _map is None:
        with _lock:
            if _map is None:
                path = price_map_path()
                data: Any = {}
                if path is not None:
                    try:
                        data = json.loads(path.read_bytes())
                    except (OSError, ValueError):
                        data = {}
                _map = data if isinstance(data, dict) else {}
    return _map


def is_loaded() -> bool:
    return _map is not None
