"""One rule for who closes a store (``council.storage.using_store``): whoever opened it."""

from __future__ import annotations

import pytest

from council.storage import SQLiteStore, using_store


def test_true_opens_the_default_store_and_closes_it_after(council_home):
    with using_store(True) as store:
        assert store is not None and store.count("sessions") == 0
        assert (council_home / "council.db").exists()
    with pytest.raises(Exception, match="closed"):
        store.count("sessions")


def test_a_store_passed_in_is_used_as_is_and_left_open(tmp_path):
    mine = SQLiteStore.open(tmp_path / "mine.db")
    with using_store(mine) as store:
        assert store is mine
    assert mine.count("sessions") == 0  # still open: its opener closes it
    mine.close()


@pytest.mark.parametrize("nothing", [None, False])
def test_none_or_false_means_no_store(nothing, council_home):
    with using_store(nothing) as store:
        assert store is None
    assert not (council_home / "council.db").exists()


async def test_a_council_closes_only_the_store_it_opened(council_home, tmp_path):
    from council import Council

    config = {"councils": {"default": {"members": ["fake/alpha", "fake/beta"], "chairman": "fake/alpha"}}}
    own = Council.from_config(config, store=True)
    opened = own.store
    await own.aclose()
    with pytest.raises(Exception, match="closed"):
        opened.count("sessions")

    mine = SQLiteStore.open(tmp_path / "mine.db")
    borrowed = Council.from_config(config, store=mine)
    await borrowed.aclose()
    assert mine.count("sessions") == 0
    mine.close()
