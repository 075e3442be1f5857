"""BiasRecord's rules are stated once, in the pydantic model; the database's CHECK constraint
(migration m017, m005's rules as they shipped) enforces the part a row can show. They must
agree: a row the model accepts is stored, and a row it refuses on those columns is refused."""

from __future__ import annotations

import math
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from council.bias.records import BiasRecord
from council.storage import SQLiteStore

ids = st.sampled_from(["s", "r-1", "", None])
whole = st.one_of(st.integers(-3, 12), st.just(2**40), st.none())
scores = st.one_of(
    st.integers(-2, 12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1.0, 9.99, 10.0, 10.01, 1e200, -1e309, "abc", None]),
)
scales = st.one_of(st.tuples(st.none(), st.none()), st.tuples(whole, whole))


def model_accepts(row: dict) -> bool:
    try:
        BiasRecord.model_validate({**row, "self_review": bool(row["self_review"])})  # stored as 0/1
    except ValidationError:
        return False
    return True


def database_accepts(store: SQLiteStore, row: dict) -> bool:
    try:
        store.insert_bias_records([row])
    except sqlite3.IntegrityError as exc:
        assert "invalid bias record" in str(exc)
        return False
    return True


@pytest.fixture(scope="module")
def store():
    s = SQLiteStore.memory()
    yield s
    s.close()


@given(
    session=ids, reviewer=ids, model=ids, position=whole, chars=whole, words=whole, score=scores, scale=scales,
)  # fmt: skip
def test_the_constraint_accepts_exactly_what_the_model_accepts(store, session, reviewer, model, position, chars, words,
                                                            score, scale):  # fmt: skip
    row = {
        "schema_version": "1.2.0", "session_id": session, "reviewer_id": reviewer, "model_id": model,
        "position": position, "response_length_chars": chars, "response_length_words": words,
        "score_value": score, "scale_min": scale[0], "scale_max": scale[1], "self_review": False,
    }  # fmt: skip
    if isinstance(score, float) and math.isnan(score):
        # SQLite stores NaN as NULL, which the constraint refuses as "not a number": the same verdict.
        assert not model_accepts(row)
    assert model_accepts(row) == database_accepts(store, row), row


def test_the_agreement_test_can_tell_them_apart(store):
    # A row both refuse, and one both accept: the comparison above is not vacuous.
    good = BiasRecord(session_id="s", reviewer_id="r", model_id="m", position=0, response_length_chars=3,
                      score_value=7.0).row()  # fmt: skip
    assert model_accepts(good) and database_accepts(store, good)
    bad = {**good, "position": -1}
    assert not model_accepts(bad) and not database_accepts(store, bad)
