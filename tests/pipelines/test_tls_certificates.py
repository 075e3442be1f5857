"""aiohttp as council imports it (council.providers.http_client): the system's CA certificates
load at the first TLS handshake, not at import, and a handshake still verifies against them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FETCH = """
import asyncio, http.server, ssl, sys, threading
from council.providers.http_client import aiohttp
from aiohttp import connector

verified = connector._SSL_CONTEXT_VERIFIED
loaded_at_import = verified.cert_store_stats()["x509_ca"]

server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
server_context.load_cert_chain(sys.argv[1], sys.argv[2])
httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
threading.Thread(target=httpd.serve_forever, daemon=True).start()

async def fetch():
    async with aiohttp.ClientSession() as http:
        try:
            async with http.get(f"https://localhost:{httpd.server_port}/") as reply:
                return str(reply.status)
        except aiohttp.ClientConnectorCertificateError:
            return "certificate refused"

print(loaded_at_import, asyncio.run(fetch()), verified.cert_store_stats()["x509_ca"] > 0, sep="|")
"""


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    where = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(where / "key.pem"), "-out", str(where / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return where


def fetch(certificate: Path, **env: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", FETCH, str(certificate / "cert.pem"), str(certificate / "key.pem")],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=certificate,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split("|")


def test_certificates_load_at_the_first_handshake_which_verifies_against_them(certificate):
    # SSL_CERT_FILE names the default certificates: here, only the local server's.
    assert fetch(certificate, SSL_CERT_FILE=str(certificate / "cert.pem")) == ["0", "200", "True"]


def test_a_server_the_default_certificates_do_not_vouch_for_is_refused(certificate):
    assert fetch(certificate) == ["0", "certificate refused", "True"]
