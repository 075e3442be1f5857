"""A process's first lines that make one module's import slow, to test what other threads do
meanwhile: 0.5 s after the module is in ``sys.modules``, before its code runs; the event
``started`` is set when the import begins."""

from __future__ import annotations


def slowed(module: str) -> str:
    """Python source to put before a ``python -c`` process's own code."""
    return (
        "import importlib.util, sys, threading, time\n"
        "class Slow:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name != {module!r}:\n"
        "            return None\n"
        "        sys.meta_path.remove(self)\n"
        "        spec = importlib.util.find_spec(name)\n"
        "        run = spec.loader.exec_module\n"
        "        def slowly(module):\n"
        "            started.set()\n"
        "            time.sleep(0.5)\n"
        "            run(module)\n"
        "        spec.loader.exec_module = slowly\n"
        "        return spec\n"
        "started = threading.Event()\n"
        "sys.meta_path.insert(0, Slow())\n"
    )
