"""Remote use: a kerncapd serving TCP with TLS and a bearer token (what
`kerncap.connect("host:port", tls=..., token_file=...)` is for)."""
from __future__ import annotations

import time

import pytest

import kerncap
from conftest import read_fake_replayer_log, write_fake_replayer


def _connect_when_listening(target, **kw):
    deadline = time.monotonic() + 10
    while True:
        c = kerncap.connect(target, **kw)
        try:
            c.status()
            return c
        except kerncap.Unavailable:
            c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_tls_with_token(tls_daemon, tmpdir_short, monkeypatch):
    target = f"localhost:{tls_daemon.port}"
    c = _connect_when_listening(target, tls=kerncap.TLS(ca=tls_daemon.cert),
                                token_file=tls_daemon.token, timeout=5)
    with c:
        st = c.status()
        assert st.tcp_listen == f"127.0.0.1:{tls_daemon.port}"
        assert c.where == f"host {target}"
        # Arm over TCP, capture, and replay: over TCP the client exports to a
        # temporary .kcap for the replayer (which speaks only the Unix socket).
        arm = c.arm(kernel="remote_kernel")
        tls_daemon.run_agent(kernels="remote_kernel", region_mib="0.25")
        cap = c.wait_for_capture(arm, timeout=20)
        monkeypatch.setenv("KERNCAP_REPLAY", write_fake_replayer(tmpdir_short))
        assert c.validate(cap).passed
        log = read_fake_replayer_log(tmpdir_short)
        assert log["src_exists"] and log["argv"][1].endswith(".kcap")
        assert not any(a.startswith("--daemon") for a in log["argv"])
    # By IP address, naming the certificate's host.
    with _connect_when_listening(f"127.0.0.1:{tls_daemon.port}",
                                 tls={"ca": tls_daemon.cert, "server_name": "localhost"},
                                 token="python-client-token", timeout=5) as c:
        assert c.status().pid == tls_daemon.proc.pid


def test_tls_without_or_with_a_wrong_token(tls_daemon):
    target = f"localhost:{tls_daemon.port}"
    _connect_when_listening(target, tls=kerncap.TLS(ca=tls_daemon.cert),
                            token_file=tls_daemon.token, timeout=5).close()
    with kerncap.connect(target, tls=kerncap.TLS(ca=tls_daemon.cert), timeout=5) as c:
        with pytest.raises(kerncap.PermissionDenied) as e:  # Unauthenticated is one
            c.status()
        assert target in str(e.value)
    with kerncap.connect(target, tls=tls_daemon.cert, token="wrong", timeout=5) as c:
        with pytest.raises(kerncap.PermissionDenied):
            c.status()


def test_untrusted_certificate_or_plaintext_is_unavailable(tls_daemon):
    target = f"localhost:{tls_daemon.port}"
    _connect_when_listening(target, tls=kerncap.TLS(ca=tls_daemon.cert),
                            token_file=tls_daemon.token, timeout=5).close()
    with kerncap.connect(target, timeout=3) as c:  # system roots do not trust it
        with pytest.raises(kerncap.Unavailable, match=f"host {target}"):
            c.status()
    with kerncap.connect(target, tls=False, timeout=3) as c:
        with pytest.raises(kerncap.Unavailable):
            c.status()
