"""Work begun beside a stage's calls waits until they are on the wire, unless it is needed
sooner (council.background); the price map read so stays one read."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from council import background
from council.session import runner


def test_work_waits_the_grace_first(monkeypatch):
    slept, ran = [], []
    monkeypatch.setattr(background.time, "sleep", slept.append)
    background.after_grace(lambda: ran.append(len(slept)))()
    assert slept == [background.GRACE_S]
    assert ran == [1]  # after the wait, not before


def test_work_needed_now_starts_at_once(monkeypatch):
    monkeypatch.setattr(background, "GRACE_S", 20.0)  # were it to wait for the grace, this would time out

    async def main() -> list[str]:
        ran: list[str] = []
        beside = runner._Beside(lambda: ran.append("job"))
        await asyncio.wait_for(beside.done(), 5)
        return ran

    assert asyncio.run(main()) == ["job"]


def test_a_price_looked_up_during_the_grace_is_read_once():
    code = (
        "import json\n"
        "from council.providers import prices\n"
        "reads, loads = [], json.loads\n"
        "prices.json.loads = lambda b: (reads.append(1), loads(b))[1]\n"
        "prices.load_in_background()\n"
        "price = prices.mapped_price('openai', 'gpt-4o')\n"
        "prices._loader.join()\n"
        "print(len(reads), price is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "True"]
