"""Query hashing: HMAC-SHA256 of a query under this installation's secret salt.

Apart from the bias records (:mod:`council.bias.records`, which re-exports it) because a
session hashes its query before its first call, and the record models are not needed until
its replies are in.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import stat
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from council.errors import ConfigError
from council._util.logs import get_logger

log = get_logger("council.bias")

SALT_FILE = "query_hash_salt"
SALT_BYTES = 32
#: A shared salt file must hold at least this many bytes (e.g. ``openssl rand -hex 32``).
SHARED_SALT_MIN_BYTES = 16
#: The salt's fingerprint is the HMAC of this constant: stored in the database to notice a
#: replaced salt, it tells nothing about the salt or any query.
FINGERPRINT_MESSAGE = b"council query-hash salt fingerprint v1"


def read_shared_salt(path: Path) -> bytes:
    """The salt in ``COUNCIL_SALT_FILE``, shared by every replica as a secret file.

    Secrets mounts give read-only files owned by root, often behind symbolic links
    (Kubernetes: ``..data/``), readable by the container's user: all accepted. Refused,
    with one line: a file that does not exist (it is never created: replicas that made
    their own salts would silently stop grouping), one writable by group or others, a
    directory, and one too short to be a secret. A trailing newline is not part of it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    except FileNotFoundError:
        raise ConfigError(f"COUNCIL_SALT_FILE {path} does not exist (it is read, never created)") from None
    except OSError as exc:
        raise ConfigError(f"COUNCIL_SALT_FILE {path} cannot be read ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigError(f"COUNCIL_SALT_FILE {path} is not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if os.name == "posix" and info.st_mode & 0o022:
            raise ConfigError(
                f"COUNCIL_SALT_FILE {path} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): "
                "anyone could change the salt"
            )
        salt = fh.read(1 << 16).rstrip(b"\r\n")
    if len(salt) < SHARED_SALT_MIN_BYTES:
        raise ConfigError(
            f"COUNCIL_SALT_FILE {path} holds {len(salt)} bytes; a salt needs at least {SHARED_SALT_MIN_BYTES} "
            "(e.g. openssl rand -hex 32)"
        )
    return salt


class QueryHasher:
    """HMAC-SHA256 of queries under this installation's secret salt.

    The salt file (``<home>/query_hash_salt``, mode 0600) is created on first use and
    is never exported: hashes group identical queries on one installation and cannot
    be matched against a dictionary of queries elsewhere.
    """

    def __init__(
        self,
        home: Path | str,
        *,
        had_hashes: Callable[[], bool] | None = None,
        swap_fingerprint: Callable[[str], str | None] | None = None,
        salt_file: Path | str | None = None,
    ) -> None:
        """``had_hashes()``: whether hashes made with an earlier salt are on record (asked only
        when the salt file is missing, to warn that a new salt will not group with them).
        ``swap_fingerprint(new)`` stores the salt's fingerprint and returns the one stored
        before: a different one means the salt file was replaced (a warning).
        ``salt_file`` (``COUNCIL_SALT_FILE``): a salt shared by replicas as a secret file,
        read as it is and never created (:func:`read_shared_salt`)."""
        self.home = Path(home)
        self.salt_path = self.home / SALT_FILE
        self.shared_salt = Path(salt_file) if salt_file else None
        self.had_hashes = had_hashes
        self.swap_fingerprint = swap_fingerprint
        self._salt: bytes | None = None
        self._told_replaced = False  # the missing-salt warning already said it

    @classmethod
    def of_store(cls, store: Any) -> QueryHasher:
        """The installation's hasher for a run writing to ``store`` (or None): its salt file in
        the data directory, or ``COUNCIL_SALT_FILE``; a replaced salt is noticed by the store."""
        from council._util.home import council_home

        def had_hashes() -> bool:
            return store is not None and bool(store.has_query_hashes())

        swap = (lambda fp: store.swap_setting("query_hash_salt_fingerprint", fp)) if store is not None else None
        return cls(council_home(), had_hashes=had_hashes, swap_fingerprint=swap,
                   salt_file=os.environ.get("COUNCIL_SALT_FILE") or None)  # fmt: skip

    def fingerprint(self) -> str:
        """HMAC-SHA256 of a constant under the salt: the same salt, the same fingerprint."""
        return hmac.new(self._salt_bytes(), FINGERPRINT_MESSAGE, hashlib.sha256).hexdigest()

    def _salt_bytes(self) -> bytes:
        if self._salt is None:
            self._salt = read_shared_salt(self.shared_salt) if self.shared_salt else self._load_or_create()
            if self.swap_fingerprint is not None:
                self._check_fingerprint(self.swap_fingerprint)
        return self._salt

    def _check_fingerprint(self, swap: Callable[[str], str | None]) -> None:
        current = self.fingerprint()
        before = swap(current)
        if before is not None and before != current and not self._told_replaced:
            log.warning(
                f"the query-hash salt {self.shared_salt or self.salt_path} is not the one earlier query hashes "
                "were made with: they will no longer group with new ones "
                "(put the earlier salt file back to keep them together)"
            )

    def hash(self, query: str) -> str:
        """The full 64-hex digest of the NFC-normalised, stripped query."""
        salt = self._salt_bytes()
        message = unicodedata.normalize("NFC", query).strip().encode("utf-8")
        return hmac.new(salt, message, hashlib.sha256).hexdigest()

    def _load_or_create(self) -> bytes:
        try:
            return self._load()
        except FileNotFoundError:
            pass
        replacing = self.had_hashes is not None and self.had_hashes()
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._create()
        self._told_replaced = replacing
        if replacing:
            log.warning(
                f"the query-hash salt {self.salt_path} was missing and a new one was made: earlier query "
                "hashes will no longer group with new ones"
            )
        return self._load()

    def _create(self) -> None:
        # Write the salt under a private temporary name, then hard-link it into place:
        # the link either appears complete or fails with FileExistsError because
        # another process won the race (we then read theirs). A reader can never see
        # a half-written salt.
        tmp = self.home / f".{SALT_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(SALT_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, self.salt_path)
            except FileExistsError:
                pass
            except OSError as exc:  # a filesystem without hard links: exclusive create in place
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                self._create_in_place()
        finally:
            tmp.unlink(missing_ok=True)

    def _create_in_place(self) -> None:
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.salt_path, flags, 0o600)
        except FileExistsError:
            return
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(SALT_BYTES))
            fh.flush()
            os.fsync(fh.fileno())

    def _load(self) -> bytes:
        try:
            fd = os.open(self.salt_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfigError(f"salt file {self.salt_path} is a symbolic link; refusing to use it") from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ConfigError(f"salt file {self.salt_path} is {kind}; remove it to make a new salt")
        with os.fdopen(fd, "rb") as fh:
            if os.name == "posix" and info.st_mode & 0o077:
                raise ConfigError(
                    f"salt file {self.salt_path} is readable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
                    f"run: chmod 600 {self.salt_path}"
                )
            salt = fh.read()
        for _ in range(20):  # only the in-place fallback can expose a short salt, briefly
            if len(salt) >= SALT_BYTES:
                return salt
            time.sleep(0.05)
            salt = self.salt_path.read_bytes()
        raise ConfigError(f"salt file {self.salt_path} is corrupt ({len(salt)} bytes); remove it to make a new one")
