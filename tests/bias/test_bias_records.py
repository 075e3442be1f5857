"""Bias records: privacy (no raw text, salted query hashes) and per-session bias metadata."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import statistics
from concurrent.futures import ProcessPoolExecutor

import pytest
from pydantic import ValidationError

from council.bias import records as rec_mod
from council.bias.records import BiasRecord, QueryHasher, session_bias_metadata
from council.config import ConfigFile
from council.config.loader import resolve_privacy
from council.errors import ConfigError
from council.methods.bias_indicators import (
    audit_reviewer_calibration,
    calculate_length_correlation,
    calculate_position_bias,
)

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _record(**over):
    base = dict(
        schema_version="1.1.0",
        session_id="s1",
        reviewer_id="openai/gpt-4o",
        model_id="anthropic/claude",
        position=0,
        response_length_chars=1200,
        score_value=8.0,
        query_hash=None,
    )
    base.update(over)
    return base


# -- query hashing ---------------------------------------------------------------


def test_hash_is_full_hmac_not_plain_sha256(council_home):
    digest = QueryHasher(council_home).hash("What is the capital of France?")
    assert HEX64.match(digest)
    assert digest != hashlib.sha256(b"What is the capital of France?").hexdigest()


def test_hash_normalises_nfc_and_whitespace_and_is_stable(council_home):
    composed, decomposed = "caf\u00e9 au lait", "cafe\u0301 au lait"
    h = QueryHasher(council_home)
    assert h.hash(composed) == h.hash(f"  {decomposed}\n")
    assert h.hash(composed) != h.hash("cafe au lait")
    # A new hasher on the same home reads the same salt.
    assert QueryHasher(council_home).hash(composed) == h.hash(composed)


def test_two_installations_hash_differently(tmp_path):
    a, b = QueryHasher(tmp_path / "home-a"), QueryHasher(tmp_path / "home-b")
    assert a.hash("same question") != b.hash("same question")


def test_salt_file_created_on_first_use_with_0600(council_home):
    hasher = QueryHasher(council_home)
    assert not hasher.salt_path.exists()  # nothing written until a query is hashed
    hasher.hash("q")
    info = hasher.salt_path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_size == 32
    assert [p.name for p in council_home.iterdir()] == [hasher.salt_path.name]  # no temp files left


def test_refuses_group_readable_salt(council_home):
    QueryHasher(council_home).hash("q")
    salt = council_home / rec_mod.SALT_FILE
    os.chmod(salt, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        QueryHasher(council_home).hash("q")


def test_refuses_symlinked_salt(council_home, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(os.urandom(32))
    os.chmod(target, 0o600)
    (council_home / rec_mod.SALT_FILE).symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        QueryHasher(council_home).hash("q")


def test_creation_race_uses_the_winners_salt(council_home, monkeypatch):
    winner = os.urandom(32)
    real_link = os.link

    def lose_the_race(src, dst):
        fd = os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, winner)
        os.close(fd)
        return real_link(src, dst)  # now raises FileExistsError

    monkeypatch.setattr(os, "link", lose_the_race)
    digest = QueryHasher(council_home).hash("q")
    import hmac

    assert digest == hmac.new(winner, b"q", hashlib.sha256).hexdigest()
    assert (council_home / rec_mod.SALT_FILE).read_bytes() == winner


def _hash_in_process(home: str) -> str:
    return QueryHasher(home).hash("concurrent question")


def test_concurrent_processes_agree_on_one_salt(tmp_path):
    home = str(tmp_path / "fresh")
    with ProcessPoolExecutor(4) as pool:
        digests = set(pool.map(_hash_in_process, [home] * 8))
    assert len(digests) == 1


@pytest.mark.parametrize(
    "env, flag, expected",
    [({}, False, False), ({}, True, True), ({"COUNCIL_HASH_QUERIES": "1"}, False, True),
     ({"COUNCIL_HASH_QUERIES": "0"}, True, False), ({"COUNCIL_HASH_QUERIES": ""}, True, True)],
)
def test_hashing_env_wins_over_the_file(env, flag, expected):
    config = ConfigFile.model_validate({"privacy": {"hash_queries": flag}})
    assert resolve_privacy(config, env).hash_queries is expected


def test_privacy_reads_process_env(monkeypatch):
    config = ConfigFile()
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1")
    assert resolve_privacy(config).hash_queries is True
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "maybe")
    with pytest.raises(ConfigError):
        resolve_privacy(config)


# -- record schema ------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["query", "question", "response", "answer", "text", "prompt", "reasoning", "responseText", "query_text",
            "model_response"]
)
def test_records_reject_raw_text_keys(key):
    with pytest.raises(ValidationError, match="never carry raw text"):
        BiasRecord.model_validate(_record(**{key: "the raw text"}))


def test_records_ignore_other_unknown_keys_and_keep_measurements():
    r = BiasRecord.model_validate(_record(tool_version="3", answer_id="a1", response_tokens=50))
    dumped = r.model_dump()
    assert "tool_version" not in dumped and "answer_id" not in dumped
    assert dumped["response_length_chars"] == 1200 and dumped["query_hash"] is None


def test_query_hash_must_be_a_digest_not_text():
    with pytest.raises(ValidationError):
        BiasRecord.model_validate(_record(query_hash="what is the capital of france"))
    assert BiasRecord.model_validate(_record(query_hash="a" * 64)).query_hash == "a" * 64


def test_record_validation():
    with pytest.raises(ValidationError, match="outside the scale"):
        BiasRecord.model_validate(_record(score_value=11, scale_min=1, scale_max=10))
    with pytest.raises(ValidationError, match="schema_version"):
        BiasRecord.model_validate(_record(schema_version="2.0.0"))
    with pytest.raises(ValidationError):
        BiasRecord.model_validate(_record(position=-1))
    ts = BiasRecord.model_validate(_record(timestamp="2026-03-01T10:00:00+02:00")).timestamp
    assert ts == "2026-03-01T08:00:00.000000+00:00"
    assert BiasRecord.model_validate(_record(self_review=True)).row()["self_review"] == 1
    with pytest.raises(ValidationError):  # strict types: 1 is not a boolean
        BiasRecord.model_validate(_record(self_review=1))


# -- per-session metadata --------------------------------------------------------------

# 3 reviewers × 4 answers, each reviewer with its own display order.
SESSION = {
    "r1": (["m1", "m2", "m3", "m4"], {"m1": 6, "m2": 7, "m3": 5, "m4": 6}),
    "r2": (["m3", "m1", "m4", "m2"], {"m1": 8, "m2": 9, "m3": 8, "m4": 7}),
    "r3": (["m4", "m3", "m2", "m1"], {"m1": 7, "m2": 7, "m3": 8, "m4": 7}),
}
LENGTHS = {"m1": 400, "m2": 1500, "m3": 900, "m4": 700}


def _session_records(self_reviewer=None):
    out = []
    for reviewer, (order, scores) in SESSION.items():
        for pos, model in enumerate(order):
            out.append(BiasRecord(session_id="s", reviewer_id=reviewer, model_id=model, position=pos,
                                  response_length_chars=LENGTHS[model], score_value=scores[model],
                                  self_review=(reviewer == self_reviewer and model == "m1")))
    return out


def test_session_metadata_matches_the_seed_functions():
    meta = session_bias_metadata(_session_records(), length_unit="chars")  # these records carry characters only
    expected_cal = audit_reviewer_calibration({r: dict(scores) for r, (_, scores) in SESSION.items()})
    for reviewer, cal in expected_cal.items():
        got = meta.calibration[reviewer]
        assert (got.mean, got.z_score, got.classification) == (cal["mean"], cal["z_score"], cal["classification"])
        assert got.samples == 4
    avg = {m: statistics.mean(s[m] for _, s in SESSION.values()) for m in LENGTHS}
    assert (meta.length_correlation.r, meta.length_correlation.interpretation) == calculate_length_correlation(
        LENGTHS, avg
    )
    variance, detected = calculate_position_bias(
        [{"display_order": order, "scores": scores} for order, scores in SESSION.values()]
    )
    assert (meta.position_bias.variance, meta.position_bias.bias_detected) == (variance, detected)
    assert meta.position_bias.means[0] == statistics.mean([6, 8, 7])  # m1 by r1, m3 by r2, m4 by r3
    assert meta.position_bias.orderings == 3


def test_session_metadata_is_honest_about_sample_sizes():
    meta = session_bias_metadata(_session_records(), length_unit="chars")
    rows = {h.metric: h for h in meta.honesty}
    assert (rows["length_correlation"].data_points, rows["length_correlation"].minimum) == (4, 30)
    assert (rows["position_bias"].data_points, rows["position_bias"].minimum) == (3, 20)
    assert (rows["reviewer_calibration"].data_points, rows["reviewer_calibration"].minimum) == (12, 50)
    assert all(h.status == "insufficient" and h.verdict is None for h in meta.honesty)
    assert meta.note and "indicators, not evidence" in meta.note


def test_session_metadata_flags_only_extreme_length_correlation():
    assert session_bias_metadata(_session_records()).flags == []
    recs = [BiasRecord(session_id="s", reviewer_id=f"r{i}", model_id=m, position=p, response_length_chars=length,
                       score_value=score)
            for i in range(2)
            for p, (m, length, score) in enumerate([("a", 100, 3), ("b", 500, 5), ("c", 900, 7), ("d", 1300, 9)])]
    meta = session_bias_metadata(recs, length_unit="chars")
    assert meta.length_correlation.r == 1.0
    assert len(meta.flags) == 1 and "verbosity" in meta.flags[0]


def test_session_self_preference():
    meta = session_bias_metadata(_session_records(self_reviewer="r1"))
    (sp,) = meta.self_preference
    assert sp.reviewer_id == "r1" and sp.self_score == 6
    assert sp.others_mean == statistics.mean([8, 7]) and sp.difference == 6 - 7.5 and sp.others_n == 2


def test_session_metadata_of_no_records_and_scores_untouched():
    empty = session_bias_metadata([])
    assert empty.records == 0 and empty.calibration == {}
    assert empty.length_correlation.interpretation == "insufficient_data"
    records = _session_records()
    before = [r.score_value for r in records]
    session_bias_metadata(records)
    assert [r.score_value for r in records] == before
