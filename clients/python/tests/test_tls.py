"""TLS and authentication: a node with `warden certs` certificates and a policy."""

from __future__ import annotations

import subprocess

import pytest

import warden
from conftest import WARDEN_BIN, Cluster

POLICY = """
tokens:
  alice-token: alice
identities:
  alice: [billing]
  carol: [config]
  admin: [admin]
roles:
  billing:
    - {prefix: /locks/billing, perms: [lock, read, watch]}
  config:
    - {prefix: /config/app, perms: [kv-write, read]}
  admin:
    - {prefix: /, perms: [all]}
"""


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """One `warden serve` node with TLS on every port and the policy above."""
    tmp = tmp_path_factory.mktemp("secure")
    certs = tmp / "certs"
    subprocess.run([str(WARDEN_BIN), "certs", "--dir", str(certs), "--clients", "admin,carol"], check=True,
                   capture_output=True)
    (tmp / "policy.yaml").write_text(POLICY)
    c = Cluster(tmp, 1, ["--tls-dir", str(certs), "--auth-config", str(tmp / "policy.yaml"), "--shards", "2"],
                ["--tls-dir", str(certs)])
    c.certs = certs
    try:
        with warden.Client(c.endpoints, tls=as_identity(c, "admin")) as admin:
            c.wait_ready(admin, 1)
        yield c
    finally:
        c.stop()


def as_identity(c: Cluster, name: str | None):
    """A TLS context trusting the node CA, presenting name's client certificate (None: none)."""
    cert = key = None
    if name == "admin":  # the first --clients identity is client.pem
        cert, key = c.certs / "client.pem", c.certs / "client-key.pem"
    elif name:
        cert, key = c.certs / f"client-{name}.pem", c.certs / f"client-{name}-key.pem"
    return warden.tls_context(ca=str(c.certs / "ca.pem"), cert=cert and str(cert), key=key and str(key))


def test_client_certificate_identity_and_a_refused_prefix(secure):
    with warden.Client(secure.endpoints, tls=as_identity(secure, "carol")) as carol:
        assert carol.put("/config/app/flag", "on") >= 1
        assert carol.get("/config/app/flag").value == b"on"
        with pytest.raises(warden.Unauthorized) as refused:
            carol.put("/config/other", "x")
        assert "carol" in refused.value.msg
        assert carol.get("/config/app/flag").version == 1  # nothing changed by the refusal
        with carol.session(ttl=10) as s:
            with pytest.raises(warden.Unauthorized):
                s.lock("/locks/billing/x").acquire(timeout=0)


def test_token_over_tls(secure):
    with warden.Client(secure.endpoints, tls=as_identity(secure, None), token="alice-token") as alice:
        with alice.session(ttl=10) as s:
            with s.lock("/locks/billing/nightly") as lock:
                assert lock.held and lock.token > 0
                # The Go CLI (admin's certificate) sees alice's hold.
                out = secure.cli("locks", "info", "/locks/billing/nightly", "-o", "json")
                assert out.returncode == 0 and str(lock.token) in out.stdout, out
            with pytest.raises(warden.Unauthorized):
                s.lock("/locks/deploy/prod").acquire(timeout=0)
        with pytest.raises(warden.Unauthorized):
            alice.put("/config/app/flag", "off")


def test_refused_handshakes(secure):
    with warden.Client(secure.endpoints, tls=as_identity(secure, None)) as nobody:
        with pytest.raises(warden.Unauthorized):
            nobody.get("/config/app/flag")
    with warden.Client(secure.endpoints, tls=as_identity(secure, None), token="wrong") as wrong:
        with pytest.raises(warden.Unauthorized):
            wrong.get("/config/app/flag")
    # A client that does not trust the node CA refuses the node.
    with warden.Client(secure.endpoints, tls=warden.tls_context(), token="alice-token") as untrusting:
        with pytest.raises(warden.Unauthorized) as e:
            untrusting.get("/locks/billing/x")
        assert "certificate" in str(e.value).lower()
    # Plaintext against the TLS port is told that the port expects TLS.
    with warden.Client(secure.endpoints, token="alice-token", timeout=1.5, connect_timeout=0.5) as plain:
        with pytest.raises(warden.InvalidArgument) as e:
            plain.get("/locks/billing/x")
        assert "expects TLS" in str(e.value)
