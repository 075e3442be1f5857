"""Config file contract: parsing, precedence and one-line errors."""

from __future__ import annotations

import pytest

from council.config import load_config, resolve_council
from council.errors import ConfigError, NotFoundError

GOOD = """
[defaults]
council = "main"

[councils.main]
members = ["gpt", "claude", "openai/gpt-4o-mini"]
chairman = "gpt"
fallback_chairman = "claude"
scale = [1, 10]
self_review = "flag"

[councils.other]
members = ["gpt", "claude"]

[models.gpt]
model = "openai/gpt-4o"
api_key_env = "TEST_OPENAI_KEY"
max_concurrency = 4
rpm = 100

[models.claude]
model = "anthropic/claude-x"
api_base = "http://127.0.0.1:9/v1"
"""


def write(tmp_path, text, name="council.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_file_resolves(tmp_path):
    loaded = load_config(write(tmp_path, GOOD))
    c = resolve_council(loaded, env={"TEST_OPENAI_KEY": "sk-test-123"})
    assert c.name == "main"
    assert [m.id for m in c.members] == ["gpt", "claude", "openai/gpt-4o-mini"]
    assert c.members[2].model == "openai/gpt-4o-mini"
    assert c.reviewers == c.members  # default: the members review
    assert c.chairman.id == "gpt" and c.fallback_chairman.id == "claude"
    assert c.members[0].api_key.get_secret_value() == "sk-test-123"
    assert "sk-test-123" not in repr(c)  # keys never show in reprs/logs
    assert c.self_review == "flag" and c.scale == (1, 10)
    assert c.quorum == 2


def test_flag_overrides_default_council(tmp_path):
    loaded = load_config(write(tmp_path, GOOD))
    assert resolve_council(loaded, "other", env={"TEST_OPENAI_KEY": "x"}).name == "other"


def test_missing_key_env_var_is_one_clear_line(tmp_path):
    loaded = load_config(write(tmp_path, GOOD))
    with pytest.raises(ConfigError) as e:
        resolve_council(loaded, env={})
    msg = str(e.value)
    assert "TEST_OPENAI_KEY" in msg and "not set" in msg and "\n" not in msg


def test_unknown_member_alias(tmp_path):
    loaded = load_config(write(tmp_path, GOOD.replace('"gpt", "claude", "openai', '"gpt", "nobody", "openai')))
    with pytest.raises(ConfigError, match="unknown model alias 'nobody'"):
        resolve_council(loaded, env={"TEST_OPENAI_KEY": "x"})


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("scale = [1, 10]", "scale = [10, 1]"),
        ("scale = [1, 10]", 'scale = ["low", 10]'),
        ('self_review = "flag"', 'self_review = "sometimes"'),
        ("max_concurrency = 4", "max_concurrency = 0"),
        ("rpm = 100", "rpmm = 100"),
        ("rpm = 100", "tpm = 0"),
        ("rpm = 100", "tpm = 1000"),  # no max_tokens: a call's tokens cannot be reserved
        ("rpm = 100", "tpm = 1000\nmax_tokens = 1000"),  # no call could fit
    ],
)
def test_bad_values_are_one_line_with_location(tmp_path, bad, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, GOOD.replace(bad, fragment)))
    msg = str(e.value)
    assert "\n" not in msg
    assert str(tmp_path) in msg
    assert ("councils.main" in msg) or ("models.gpt" in msg)


def test_tpm_is_read_beside_rpm(tmp_path):
    loaded = load_config(write(tmp_path, GOOD.replace("rpm = 100", "rpm = 100\ntpm = 30000\nmax_tokens = 1024")))
    spec = resolve_council(loaded, env={"TEST_OPENAI_KEY": "x"}).members[0].spec
    assert (spec.rpm, spec.tpm, spec.max_tokens) == (100, 30000, 1024)


def test_invalid_toml(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write(tmp_path, "[councils.main\nmembers = 1"))


def test_not_utf8(tmp_path):
    p = tmp_path / "c.toml"
    p.write_bytes(b"\xff\xfe[councils]")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(p)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_unknown_council(tmp_path):
    loaded = load_config(write(tmp_path, GOOD))
    with pytest.raises(NotFoundError, match="unknown council 'nope'"):
        resolve_council(loaded, "nope", env={"TEST_OPENAI_KEY": "x"})


def test_same_model_twice_rejected(tmp_path):
    text = GOOD.replace('"openai/gpt-4o-mini"', '"openai/gpt-4o"')
    with pytest.raises(ConfigError, match="same model"):
        resolve_council(load_config(write(tmp_path, text)), env={"TEST_OPENAI_KEY": "x"})


def test_precedence_flag_env_home_default(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("COUNCIL_HOME", str(home))
    monkeypatch.delenv("COUNCIL_CONFIG", raising=False)
    assert load_config().offline_default is True
    write(home, '[councils.default]\nmembers = ["fake/home"]\n')
    assert load_config().config.councils["default"].members == ["fake/home"]
    env_file = write(tmp_path, '[councils.default]\nmembers = ["fake/env"]\n', "env.toml")
    monkeypatch.setenv("COUNCIL_CONFIG", str(env_file))
    assert load_config().config.councils["default"].members == ["fake/env"]
    flag_file = write(tmp_path, '[councils.default]\nmembers = ["fake/flag"]\n', "flag.toml")
    assert load_config(flag_file).config.councils["default"].members == ["fake/flag"]


def test_env_overrides_privacy_settings(tmp_path):
    text = '[privacy]\nhash_queries = false\n[councils.default]\nmembers = ["fake/a"]\n'
    loaded = load_config(write(tmp_path, text))
    assert resolve_council(loaded, env={}).hash_queries is False
    assert resolve_council(loaded, env={"COUNCIL_HASH_QUERIES": "1"}).hash_queries is True
    assert resolve_council(loaded, env={"COUNCIL_STORE_TRANSCRIPTS": "0"}).store_transcripts is False
    with pytest.raises(ConfigError, match="COUNCIL_HASH_QUERIES"):
        resolve_council(loaded, env={"COUNCIL_HASH_QUERIES": "maybe"})


def test_offline_default_is_two_local_models():
    loaded = load_config(None, env={"COUNCIL_HOME": "/nonexistent-council-home"})
    c = resolve_council(loaded, env={})
    assert loaded.offline_default and c.offline_default
    assert {m.model for m in c.members} == {"local/smollm2", "local/gemma3"}


def test_consensus_method_from_the_council_file_and_its_default(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\nconsensus = "copeland"\n', encoding="utf-8")
    assert resolve_council(load_config(path), env={}).consensus == "copeland"
    path.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\n', encoding="utf-8")
    assert resolve_council(load_config(path), env={}).consensus == "borda"


def test_an_unknown_consensus_method_is_one_clear_line(tmp_path, council_home):
    from conftest import invoke_cli

    path = tmp_path / "c.toml"
    path.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\nconsensus = "plurality"\n', encoding="utf-8")
    result = invoke_cli("run", "--config", str(path), "What is 2+2?")
    assert result.exit_code == 2
    assert len(result.error_lines) == 1
    assert "plurality" in result.stderr and "borda, mean_rank, copeland" in result.stderr
