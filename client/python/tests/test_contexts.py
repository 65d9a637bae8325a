"""kerncap.connect() reads kerncapctl's contexts file and applies the same
settings: the file kerncapctl writes (config set-context) is read alike,
a current context reaches its node (TLS and token included), and arguments
and $KERNCAP_SOCKET beat the current context."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import kerncap
from kerncap import _connection, _contexts

pytestmark = pytest.mark.daemon


@pytest.fixture()
def config(tmpdir_short, monkeypatch):
    path = Path(tmpdir_short) / "cfg" / "config.toml"
    monkeypatch.setenv("KERNCAP_CONFIG", str(path))
    monkeypatch.delenv("KERNCAP_SOCKET", raising=False)
    return path


def ctl(daemon, *args):
    """kerncapctl with no --socket: what a user types."""
    return subprocess.run([daemon.bins["kerncapctl"], *args], capture_output=True, text=True,
                          timeout=60)


def test_the_file_kerncapctl_writes_is_read_alike(daemon, config, tmpdir_short):
    for args in (["local", f"--socket={daemon.socket}"],
                 ["node17", "--host=node17:7443", "--tls-ca=ca.pem", "--tls-cert=me.pem",
                  "--tls-key=me.key", "--token-file=tok", "--use"],
                 ["lab", "--host=10.0.0.1:7443", "--insecure"]):
        r = subprocess.run([daemon.bins["kerncapctl"], "config", "set-context", *args],
                           capture_output=True, text=True, cwd=tmpdir_short, timeout=60)
        assert r.returncode == 0, r.stderr
    r = ctl(daemon, "config", "get-contexts", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert _contexts.describe(_contexts.load()) == json.loads(r.stdout)
    node = _contexts.load().find("node17")
    assert node.tls_ca == f"{tmpdir_short}/ca.pem" and node.token_file == f"{tmpdir_short}/tok"


def test_relative_paths_are_relative_to_the_file(daemon, config):
    config.parent.mkdir(parents=True)
    config.write_text('current-context = "n"\n[contexts.n]\nhost = "h:1"\ntls-ca = "ca.pem"\n'
                      'token-file = "sub/tok"  # a comment\n')
    r = ctl(daemon, "config", "get-contexts", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert _contexts.describe(_contexts.load()) == json.loads(r.stdout)
    assert _contexts.load().find("n").token_file == f"{config.parent}/sub/tok"


def test_a_current_context_reaches_its_daemon(daemon, config):
    r = ctl(daemon, "config", "set-context", "local", f"--socket={daemon.socket}", "--use")
    assert r.returncode == 0, r.stderr
    with kerncap.connect() as c:
        assert c.status().pid == daemon.proc.pid
        assert c.where == f"socket {daemon.socket}" and "local" in c.endpoint.source
    with kerncap.connect(context="local") as c:
        assert c.status().pid == daemon.proc.pid
    assert ctl(daemon, "status").returncode == 0  # kerncapctl goes there too


def test_a_tls_context_reaches_a_secured_node(daemon, tls_daemon, config):
    host = f"localhost:{tls_daemon.port}"
    r = ctl(daemon, "config", "set-context", "remote", f"--host={host}",
            f"--tls-ca={tls_daemon.cert}", f"--token-file={tls_daemon.token}", "--use")
    assert r.returncode == 0, r.stderr
    assert ctl(daemon, "status").returncode == 0  # what kerncapctl does with it
    with kerncap.connect(timeout=10) as c:
        assert c.where == f"host {host}"
        assert c.status().pid == tls_daemon.proc.pid  # TLS and the token from the context
    with kerncap.connect(context="remote", token="wrong", timeout=10) as c:
        with pytest.raises(kerncap.Unauthenticated):  # an argument beats the context
            c.status()


def test_precedence_arguments_and_env_beat_the_current_context(config, monkeypatch):
    config.parent.mkdir(parents=True)
    config.write_text('current-context = "remote"\n'
                      '[contexts.remote]\nhost = "node17:7443"\ntls-ca = "/ca.pem"\n'
                      'token-file = "/tok"\n'
                      '[contexts.local]\nsocket = "/ctx.sock"\n'
                      '[contexts.tlsonly]\ntls-ca = "/other-ca.pem"\n')
    r = _connection.resolve(None)
    assert r.endpoint.grpc_target == "node17:7443" and r.token_file == "/tok"
    assert r.tls == kerncap.TLS(ca="/ca.pem")
    r = _connection.resolve("/arg.sock")  # an argument: no context settings at all
    assert r.endpoint.unix_path == "/arg.sock" and r.token_file is None and r.context is None
    r = _connection.resolve("other:1")
    assert r.token_file is None and r.tls is None  # node17's token never goes to other:1
    r = _connection.resolve(None, context="local")
    assert r.endpoint.unix_path == "/ctx.sock" and r.endpoint.source.startswith('context "local"')
    monkeypatch.setenv("KERNCAP_SOCKET", "/env.sock")
    r = _connection.resolve(None)  # $KERNCAP_SOCKET beats the current context
    assert r.endpoint.unix_path == "/env.sock" and r.endpoint.source == "$KERNCAP_SOCKET"
    assert r.token_file is None and r.tls is None
    r = _connection.resolve(None, context="local")  # a named context beats $KERNCAP_SOCKET
    assert r.endpoint.unix_path == "/ctx.sock"
    r = _connection.resolve(None, context="tlsonly")  # no endpoint of its own
    assert r.endpoint.unix_path == "/env.sock" and r.tls == kerncap.TLS(ca="/other-ca.pem")
    r = _connection.resolve(None, context="remote", tls=False, token_file="/mine")
    assert r.tls is False and r.token_file == "/mine"
    monkeypatch.delenv("KERNCAP_SOCKET")
    config.write_text('[contexts.remote]\nhost = "node17:7443"\n')  # no current context
    assert _connection.resolve(None).endpoint.source == "default"


def test_insecure_context_is_plaintext(config):
    config.parent.mkdir(parents=True)
    config.write_text('current-context = "lab"\n[contexts.lab]\nhost = "lab:7443"\n'
                      "insecure = true\n")
    assert _connection.resolve(None).tls is False


@pytest.mark.parametrize("text,message", [
    ("current-context = \n", "config.toml"),
    ('current-context = "gone"\n', 'current-context "gone" is not defined'),
    ('[contexts.a]\nhost = "h:1"\nsocket = "/s"\n', "both host and socket"),
    ('[contexts.a]\nport = "1"\n', 'unknown key "port"'),
    ('[contexts.a]\ninsecure = "yes"\n', "expected true or false"),
    ('[profiles.a]\nhost = "h:1"\n', "unknown table [profiles]"),
    ('host = "h:1"\n', 'unknown key "host" at the top level'),
])
def test_a_broken_contexts_file_is_refused_by_both(daemon, config, text, message):
    config.parent.mkdir(parents=True)
    config.write_text(text)
    with pytest.raises(kerncap.InvalidArgument) as e:
        kerncap.connect()
    assert str(config) in str(e.value) and message in str(e.value), str(e.value)
    r = ctl(daemon, "status")  # kerncapctl refuses it too
    assert r.returncode != 0 and str(config) in r.stderr, r.stderr
    # An explicit target does not need the file.
    with kerncap.connect(daemon.socket) as c:
        assert c.status().pid == daemon.proc.pid


def test_no_such_context_names_the_defined_ones(config):
    config.parent.mkdir(parents=True)
    config.write_text('[contexts.a]\nhost = "h:1"\n[contexts.b]\nsocket = "/s"\n')
    with pytest.raises(kerncap.NotFound, match=r'no context "c" in .*\(defined: a, b\)'):
        kerncap.connect(context="c")


def test_missing_file_is_no_contexts(config):
    assert not config.exists()
    assert _contexts.load().contexts == {}
    assert _connection.resolve(None).endpoint.source == "default"
    assert os.environ["KERNCAP_CONFIG"] == str(config)
