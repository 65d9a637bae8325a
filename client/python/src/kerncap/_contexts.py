"""kerncapctl's contexts file, read the way kerncapctl reads it
(client/kerncapctl/context_config.h), so that `kerncap.connect()` and the MCP
server reach the node `kerncapctl` would:

    current-context = "node17"

    [contexts.node17]
    host = "node17:7443"          # or: socket = "/run/kerncap/kerncapd.sock"
    tls-ca = "/home/ann/kerncap/ca.pem"
    tls-cert = "..."              # mutual TLS, with tls-key
    tls-key = "..."
    token-file = "/home/ann/kerncap/node17.token"
    insecure = false              # plaintext TCP (daemons with --insecure-tcp)

Where: $KERNCAP_CONFIG, else $XDG_CONFIG_HOME/kerncap/config.toml (an
absolute $XDG_CONFIG_HOME), else $HOME/.config/kerncap/config.toml
(common/control/default_paths.h DefaultClientConfigPath). The file is TOML
(read with tomllib, or tomli before Python 3.11); what kerncapctl refuses is
refused here too, with the file named: unknown tables or keys, a value of
the wrong type, a context with both host and socket, a current-context that
is not defined. Relative paths are relative to the file's folder. A missing
file is no contexts.
"""
from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from . import errors

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - Python 3.9/3.10 (the package depends on tomli there)
    import tomli as _toml

_PATH_KEYS = {"socket": "socket", "tls-ca": "tls_ca", "tls-cert": "tls_cert",
              "tls-key": "tls_key", "token-file": "token_file"}
_KEYS = "host, socket, tls-ca, tls-cert, tls-key, token-file, insecure"


@dataclass(frozen=True)
class Context:
    """One [contexts.NAME] table (empty strings: not set)."""
    name: str
    host: str = ""
    socket: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    token_file: str = ""
    insecure: bool = False


@dataclass(frozen=True)
class ContextConfig:
    path: str
    current: str = ""
    contexts: Dict[str, Context] = field(default_factory=dict)

    def find(self, name: str) -> Context:
        ctx = self.contexts.get(name)
        if ctx is None:
            names = ", ".join(self.contexts)
            raise errors.NotFound(
                f'no context "{name}" in {self.path}'
                + (f" (defined: {names})" if names else
                   " (it defines none; see kerncapctl config set-context)"))
        return ctx


def config_path() -> str:
    """The contexts file kerncapctl uses (DefaultClientConfigPath)."""
    env = os.environ.get("KERNCAP_CONFIG", "")
    if env:
        return env
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):  # XDG: a relative value is invalid and ignored
        return f"{xdg}/kerncap/config.toml"
    home = os.environ.get("HOME", "")
    if not home:
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            home = ""
    return f"{home}/.config/kerncap/config.toml"


def load(path: Optional[str] = None) -> ContextConfig:
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return ContextConfig(path)
    except PermissionError:
        raise errors.PermissionDenied(f"contexts file {path}: permission denied") from None
    except OSError as e:
        raise errors.InvalidArgument(f"contexts file {path}: {e.strerror}") from None
    return parse(text, path, os.path.dirname(path))


def parse(text: bytes, path: str, folder: str) -> ContextConfig:
    def bad(what: str) -> errors.InvalidArgument:
        return errors.InvalidArgument(f"{path}: {what}")

    try:
        doc: Dict[str, Any] = _toml.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise bad("not UTF-8 text") from None
    except _toml.TOMLDecodeError as e:
        raise bad(str(e)) from None
    current = ""
    contexts: Dict[str, Context] = {}
    for key, value in doc.items():
        if key == "current-context":
            if not isinstance(value, str):
                raise bad('current-context: expected a "quoted" context name')
            current = value
        elif key == "contexts":
            if not isinstance(value, dict):
                raise bad("contexts: expected [contexts.NAME] tables")
            for name, table in value.items():
                contexts[name] = _context(name, table, folder, bad)
        elif isinstance(value, dict):
            raise bad(f"unknown table [{key}]: only [contexts.NAME] tables")
        else:
            raise bad(f'unknown key "{key}" at the top level (only current-context; context '
                      "settings go under [contexts.NAME])")
    if current and current not in contexts:
        raise bad(f'current-context "{current}" is not defined ([contexts.{current}] is missing)')
    return ContextConfig(path, current, contexts)


def _context(name: str, table: object, folder: str, bad: Any) -> Context:
    if not name:
        raise bad("empty context name")
    if not isinstance(table, dict):
        raise bad(f'contexts.{name}: expected a table [contexts.{name}]')
    fields: Dict[str, Any] = {}
    for key, value in table.items():
        if key == "insecure":
            if not isinstance(value, bool):
                raise bad(f"context {name}: insecure: expected true or false")
            fields["insecure"] = value
            continue
        if key != "host" and key not in _PATH_KEYS:
            raise bad(f'context {name}: unknown key "{key}" (context keys: {_KEYS})')
        if not isinstance(value, str):
            raise bad(f'context {name}: {key}: expected a "quoted string"')
        if key == "host":
            fields["host"] = value
        else:
            fields[_PATH_KEYS[key]] = _resolve(value, folder)
    if fields.get("host") and fields.get("socket"):
        raise bad(f'context "{name}" has both host and socket: give one')
    return Context(name, **fields)


def _resolve(p: str, folder: str) -> str:
    if not p or p.startswith("/") or not folder:
        return p
    return f"{folder}/{p}"


def describe(config: ContextConfig) -> Mapping[str, object]:
    """The shape of `kerncapctl config get-contexts -o json` (for tests and
    for showing which settings were read)."""
    return {"file": config.path, "current_context": config.current,
            "contexts": [{"name": c.name, "current": c.name == config.current, "host": c.host,
                          "socket": c.socket, "tls_ca": c.tls_ca, "tls_cert": c.tls_cert,
                          "tls_key": c.tls_key, "token_file": c.token_file,
                          "insecure": c.insecure} for c in config.contexts.values()]}
