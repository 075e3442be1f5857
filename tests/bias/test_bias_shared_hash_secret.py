"""COUNCIL_SALT_FILE: replicas share the query-hash salt as a secret file, never stored in the database."""

from __future__ import annotations

import os
import re

import pytest
from conftest import invoke_cli, write_config

from council.bias.records import QueryHasher, read_shared_salt
from council.errors import ConfigError

SALT = b"0123456789abcdef0123456789abcdef"


def _secret(tmp_path, content: bytes = SALT, mode: int = 0o444):
    path = tmp_path / "secret-salt"
    path.write_bytes(content)
    os.chmod(path, mode)
    return path


def test_replicas_with_the_same_salt_file_hash_alike_and_unlike_a_home_salt(tmp_path):
    salt = _secret(tmp_path)
    one = QueryHasher(tmp_path / "home-1", salt_file=salt)
    two = QueryHasher(tmp_path / "home-2", salt_file=salt)
    alone = QueryHasher(tmp_path / "home-3")
    assert one.hash("What is 2+2?") == two.hash(" What is 2+2? ")
    assert one.hash("What is 2+2?") != alone.hash("What is 2+2?")
    assert one.fingerprint() == two.fingerprint() != alone.fingerprint()
    assert SALT.hex() not in one.fingerprint() and len(one.fingerprint()) == 64
    # Nothing was written next to the shared salt or in the homes that use it.
    assert not (tmp_path / "home-1").exists() and not (tmp_path / "home-2").exists()
    assert (tmp_path / "home-3" / "query_hash_salt").exists()


def test_a_trailing_newline_is_not_part_of_the_salt(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = _secret(tmp_path / "a")
    newline = _secret(tmp_path / "b", SALT + b"\n")
    assert read_shared_salt(plain) == read_shared_salt(newline) == SALT


def test_a_kubernetes_style_symlinked_read_only_secret_is_accepted(tmp_path):
    data = tmp_path / "..2026_11_25" / "salt"
    data.parent.mkdir()
    data.write_bytes(SALT + b"\n")
    os.chmod(data, 0o444)
    (tmp_path / "..data").symlink_to(data.parent.name)
    (tmp_path / "salt").symlink_to("..data/salt")
    assert read_shared_salt(tmp_path / "salt") == SALT


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda p: p / "missing", "does not exist (it is read, never created)"),
        (lambda p: (p / "dir").mkdir() or p / "dir", "not a regular file"),
        (lambda p: _secret(p, mode=0o666), "writable by others"),
        (lambda p: _secret(p, mode=0o620), "writable by others"),
        (lambda p: _secret(p, b"short\n"), "holds 5 bytes"),
    ],
)
def test_an_unusable_salt_file_is_one_config_error_and_nothing_is_created(tmp_path, make, fragment):
    path = make(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        QueryHasher(tmp_path / "home", salt_file=path).hash("q")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_cli_refuses_a_missing_salt_file_before_any_call(tmp_path, council_home):
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    missing = tmp_path / "no-such-salt"
    result = invoke_cli(
        "run", "What is 2+2?", "--config", str(cfg),
        env={"COUNCIL_HASH_QUERIES": "1", "COUNCIL_SALT_FILE": str(missing)},
    )  # fmt: skip
    assert result.exit_code == 2 and len(result.error_lines) == 1
    assert "does not exist" in result.stderr and not missing.exists()
    assert not (council_home / "query_hash_salt").exists()


def test_the_cli_uses_the_shared_salt(tmp_path, council_home):
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    salt = _secret(tmp_path)
    env = {"COUNCIL_HASH_QUERIES": "1", "COUNCIL_SALT_FILE": str(salt)}
    result = invoke_cli("run", "What is 2+2?", "--config", str(cfg), "--json", env=env)
    assert result.exit_code == 0, result.stderr
    from conftest import db_rows

    (stored,) = db_rows(council_home, "select query_hash from sessions")
    assert stored[0] == QueryHasher(tmp_path / "elsewhere", salt_file=salt).hash("What is 2+2?")
    assert not (council_home / "query_hash_salt").exists()
