"""A careless user's config file, through the real CLI: one line that says what to do."""

from __future__ import annotations

import pytest
from conftest import invoke_cli


def test_a_key_written_in_the_config_file_says_to_use_api_key_env(tmp_path, council_home):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[councils.default]\nmembers = ["a", "b"]\nchairman = "a"\n'
        '[models.a]\nmodel = "openai/gpt-4o"\napi_key = "sk-test-abcdefghijklmnop"\n[models.b]\nmodel = "fake/b"\n'
    )
    result = invoke_cli("run", "q?", "--config", str(cfg))
    assert result.exit_code == 2
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert "models.a.api_key" in line and "api_key_env" in line, line
    assert "[redacted] key" not in line and "sk-test-abcdefghijklmnop" not in line


def test_a_heartbeat_that_is_not_a_number_is_refused(tmp_path, council_home):
    # NaN passes a range check (every comparison is false) and asyncio.sleep(nan) returns at
    # once: the heartbeat would spin, flooding the client with progress.
    result = invoke_cli("mcp", "--heartbeat", "nan")
    assert result.exit_code == 2
    assert "--heartbeat" in result.stderr and "nan" in result.stderr


def credentials_config(tmp_path, base_url: str, **model: object):
    """A council of two models on ``base_url``, the first with ``model``'s settings."""
    from conftest import write_config

    common = {"api_base": base_url, "retries": 0, "timeout": 10}
    models = {"a": {"model": "openai/mock-alpha", **common, **model}, "b": {"model": "openai/mock-beta", **common}}
    return write_config(tmp_path / "c.toml", models, chairman="a")


@pytest.mark.parametrize(
    "setting, fragment",
    [
        ({"api_key_env": "CANARY_CRED"}, "api_base carries credentials and api_key_env is also set: use one"),
        ({"transport": "litellm"}, 'api_base carries credentials, which transport = "litellm" cannot send'),
    ],
)
def test_an_api_base_with_credentials_it_cannot_send_is_one_line_before_any_call(tmp_path, council_home, setting,
                                                                                 fragment):  # fmt: skip
    from mock_server import start_mock_server

    with start_mock_server(log_requests=tmp_path / "requests.jsonl") as mock:
        base = mock.base_url.replace("http://", "http://alice:s3cret-pw-7781@")
        cfg = credentials_config(tmp_path, base, **setting)
        result = invoke_cli("run", "Why?", "--config", str(cfg), env={"CANARY_CRED": "k-7f3a9c2e5b1d4e6f8a0b"})
        assert mock.logged_requests() == []
    assert result.exit_code == 2, result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert "models.a" in line and fragment in line, line
    assert "s3cret-pw-7781" not in line and "k-7f3a9c2e5b1d4e6f8a0b" not in line


def test_a_key_with_a_line_break_or_a_control_character_is_one_line_before_any_call(tmp_path, council_home):
    from mock_server import start_mock_server

    with start_mock_server(log_requests=tmp_path / "requests.jsonl") as mock:
        cfg = credentials_config(tmp_path, mock.base_url, api_key_env="CANARY_CRED")
        for key in ("k-7f3a9c2e5b1d\r\nX-Injected: 1", "k-7f3a9c2e5b1d4e6f8a0b\n", "k-7f3a9c2e5b1d\x7f"):
            result = invoke_cli("run", "Why?", "--config", str(cfg), env={"CANARY_CRED": key})
            assert result.exit_code == 2, (repr(key), result.stderr)
            [line] = [x for x in result.stderr.splitlines() if x.strip()]
            assert "CANARY_CRED" in line and "control character" in line, line
            assert "k-7f3a9c2e" not in line
        assert mock.logged_requests() == []
