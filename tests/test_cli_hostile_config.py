"""A careless user's config file, through the real CLI: one line that says what to do."""

from __future__ import annotations

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
