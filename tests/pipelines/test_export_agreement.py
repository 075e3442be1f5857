"""Session exports carry each reviewer's agreement with the consensus and with each other
reviewer (issue 58): the JSONL line's ``bias.reviewer_agreement`` (valid against the published
schema), the CSV row's per-session means, on both storage backends, the same as the store's
``reviewer_agreement`` rows."""

from __future__ import annotations

import csv
import io
import json
from statistics import mean

import jsonschema
import pytest

from council import Council
from council.errors import CouncilError
from council.exports.sessions import export_sessions
from council.exports.shapes import export_schema

MEMBERS = ["fake/a", "fake/b+harsh", "fake/c+first", "fake/d"]


async def one_session(store, members=MEMBERS):
    council = Council.from_config({"councils": {"default": {"members": members}}}, store=store)
    try:
        return await council.run("Which planet has the most moons?", seed=3)
    finally:
        await council.aclose()


def exported(store, **options) -> str:
    out = io.StringIO()
    assert export_sessions(store, out, **options) == 1
    return out.getvalue()


@pytest.mark.parametrize("redact", [False, True])
async def test_a_session_line_carries_its_reviewers_agreement_on_both_backends(store_backend, redact):
    result = await one_session(store_backend)
    expected = [a.model_dump(mode="json") for a in result.bias.reviewer_agreement]
    assert any(a["other"] is None for a in expected) and any(a["other"] for a in expected)
    [line] = [json.loads(text) for text in exported(store_backend, redact=redact).splitlines()]
    jsonschema.validate(line, export_schema("sessions"))
    assert line["bias"]["reviewer_agreement"] == expected
    stored = {(s.reviewer, s.other): s for s in store_backend.reviewer_agreement_sums()}  # the m028 rows
    assert set(stored) == {(a["reviewer"], a["other"]) for a in expected}
    for a in expected:
        s = stored[a["reviewer"], a["other"]]
        assert s.tau_sum == pytest.approx(a["kendall_tau"] or 0) and s.top1 == int(bool(a["top1"]))

    [row] = csv.DictReader(io.StringIO(exported(store_backend, fmt="csv", redact=redact)))
    with_consensus = [a for a in expected if a["other"] is None]
    taus = [a["kendall_tau"] for a in with_consensus if a["kendall_tau"] is not None]
    tops = [a["top1"] for a in with_consensus if a["top1"] is not None]
    assert taus and float(row["reviewer_agreement_tau"]) == pytest.approx(mean(taus))
    assert float(row["reviewer_agreement_top1"]) == pytest.approx(sum(tops) / len(tops))


async def test_a_session_without_a_consensus_has_none(store_backend):
    with pytest.raises(CouncilError):  # no member answered: stored failed, without a result
        await one_session(store_backend, ["fake/a+fail", "fake/b+fail"])
    [line] = [json.loads(text) for text in exported(store_backend).splitlines()]
    jsonschema.validate(line, export_schema("sessions"))
    assert line["bias"] is None or line["bias"]["reviewer_agreement"] is None
    [row] = csv.DictReader(io.StringIO(exported(store_backend, fmt="csv")))
    assert row["reviewer_agreement_tau"] == row["reviewer_agreement_top1"] == ""
