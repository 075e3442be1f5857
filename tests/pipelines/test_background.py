"""Work begun beside a stage's calls waits until they are on the wire, unless it is needed
sooner (council._util.speedups); the price map read so stays one read."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from council import Council
from council._util import speedups
from council.providers.fake import FakeAPI
from council.session import stages
from council.session.schemas import peer_review_model


def test_work_waits_the_grace_first(monkeypatch):
    slept, ran = [], []
    monkeypatch.setattr(speedups.time, "sleep", slept.append)
    speedups.after_grace(lambda: ran.append(len(slept)))()
    assert slept == [speedups.GRACE_S]
    assert ran == [1]  # after the wait, not before


def test_work_needed_now_starts_at_once(monkeypatch):
    monkeypatch.setattr(speedups, "GRACE_S", 20.0)  # were it to wait for the grace, this would time out

    async def main() -> list[str]:
        ran: list[str] = []
        beside = speedups.Beside(lambda: ran.append("job"))
        await asyncio.wait_for(beside.done(), 5)
        return ran

    assert asyncio.run(main()) == ["job"]


def test_a_price_looked_up_during_the_grace_is_read_once():
    code = (
        "import json\n"
        "from council.config import model_map\n"
        "from council.providers import prices\n"
        "reads, loads = [], json.loads\n"
        "model_map.json.loads = lambda b: (reads.append(1), loads(b))[1]\n"
        "prices.load_in_background()\n"
        "price = prices.mapped_price('openai', 'gpt-4o')\n"
        "prices._loader.join()\n"
        "print(len(reads), price is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "True"]


class _HeldAPI(FakeAPI):
    """A member whose first reply (its answer) waits until the test lets it go."""

    def __init__(self, model: str, release: asyncio.Event) -> None:
        super().__init__(model)
        self.release = release

    async def generate(self, request):
        if not self.history:
            await self.release.wait()
        return await super().generate(request)


async def test_the_review_models_are_built_while_the_answers_are_awaited():
    members = ["fake/a1", "fake/a2", "fake/a3", "fake/a4"]
    scale = (1, 7)  # a scale no other test builds models for
    spec = {"members": members, "chairman": "fake/a1", "scale": list(scale), "self_review": "exclude"}
    config = {"councils": {"default": spec}}
    seen = (len(members) - 1, scale)  # each reviewer ranks the others' answers
    council = Council.from_config(config, store=False)
    release = asyncio.Event()
    for m in members:
        council.clients[m].api = _HeldAPI(m, release)
    built = peer_review_model.cache_info().currsize
    session = asyncio.create_task(council.run("Why is the sky blue?", seed=3))
    for _ in range(500):  # the answers are held: whatever is built now is built beside them
        if seen in stages._REVIEWS_BUILT:
            break
        await asyncio.sleep(0.01)
    assert seen in stages._REVIEWS_BUILT
    assert peer_review_model.cache_info().currsize > built
    assert not any(council.clients[m].api.history[1:] for m in members)  # no review asked yet
    release.set()
    result = await session
    assert result.status == "complete"
