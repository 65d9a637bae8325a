"""Where kerncapd is and how to reach it (shared by the sync and async clients).

Targets, as kerncapctl takes them: an absolute Unix socket path
("/run/kerncap/kerncapd.sock"), a "unix:" URI, or "HOST:PORT" /
"[IPv6]:PORT" for a daemon serving TCP with TLS.

Which daemon, and with which TLS and token settings, is decided as
kerncapctl decides it from its flags, its environment and its contexts file
(_contexts.py), first match wins:

    1. the target argument (kerncapctl: --socket / --host);
    2. the context argument (kerncapctl: --context NAME): its host or socket;
    3. $KERNCAP_SOCKET;
    4. the contexts file's current-context: its host or socket;
    5. the daemon's default socket (common/control/default_paths.h):
         root:  /run/kerncap/kerncapd.sock
         user:  $XDG_RUNTIME_DIR/kerncap/kerncapd.sock (when absolute),
                else /tmp/kerncap-<uid>/kerncapd.sock;
                when that does not exist: /run/kerncap/kerncapd.sock if it
                exists (the node's system daemon)

TLS files, the token file and `insecure` come from the arguments, else
from the context in use (the one named, or the current one when it gave the
endpoint): a context's credentials never go to an endpoint that came from
elsewhere. As in kerncapctl, a context's token is sent only over TCP.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, TypedDict, Union

from . import _contexts, errors
from ._types import ChannelOption
from ._types import PathLike as PathLike

if TYPE_CHECKING:
    import grpc

# Matches common/control/limits.h kMaxMessageBytes: one 4 MiB chunk plus
# framing, or the manifest of a very large capture, exceed gRPC's 4 MiB default.
MAX_MESSAGE_BYTES = 128 << 20


def default_runtime_dir() -> str:
    if os.geteuid() == 0:
        return "/run/kerncap"
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):  # XDG says relative values must be ignored
        return f"{xdg}/kerncap"
    return f"/tmp/kerncap-{os.geteuid()}"


SYSTEM_SOCKET = "/run/kerncap/kerncapd.sock"


def default_socket_path() -> str:
    """$KERNCAP_SOCKET; else your own kerncapd's socket when it runs (or as
    root); else the node's system daemon's (/run/kerncap, group kerncap) when
    that runs; else your own default. kerncapctl's rule
    (common/control/default_paths.h DefaultClientSocketPath)."""
    env = os.environ.get("KERNCAP_SOCKET", "")
    if env:
        return env
    own = f"{default_runtime_dir()}/kerncapd.sock"
    if os.geteuid() == 0 or os.path.exists(own):
        return own
    if os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return own


def socket_access_hint(path: str) -> str:
    """How to get access to the system daemon's socket ("" for other paths)."""
    if path != SYSTEM_SOCKET:
        return ""
    return ("the node's system kerncapd lets members of the group kerncap in: ask an "
            "administrator to run `usermod -aG kerncap $USER`, then log in again; or start a "
            "kerncapd of your own (`kerncapd &`)")


@dataclass(frozen=True)
class Endpoint:
    is_unix: bool
    grpc_target: str   # "unix:/abs/path" or "host:port"
    unix_path: str = ""
    where: str = ""    # "socket /path" or "host h:p", for messages
    # What chose it: "argument", "$KERNCAP_SOCKET", 'context "NAME" (FILE)', "default".
    source: str = "argument"


def parse_target(target: Optional[PathLike], source: str = "argument") -> Endpoint:
    text = default_socket_path() if target is None else os.fspath(target)
    if not text:
        raise errors.InvalidArgument("empty kerncapd target")
    rest = text[len("unix:"):] if text.startswith("unix:") else text
    if text.startswith("unix:") or text.startswith("/") or text.startswith("."):
        if not rest.startswith("/"):
            # Relative paths are resolved here (kerncapctl insists on absolute
            # ones; a notebook's working directory is a reasonable base).
            rest = str(Path(rest).resolve())
        return Endpoint(True, f"unix:{rest}", rest, f"socket {rest}", source)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise errors.InvalidArgument(
            f'bad kerncapd target "{text}": expected a socket path, unix:/PATH, HOST:PORT '
            "or [IPv6]:PORT")
    return Endpoint(False, text, "", f"host {text}", source)


class TLSOptions(TypedDict, total=False):
    """connect(tls={...}): TLS's fields as a dict."""
    ca: Optional[PathLike]
    cert: Optional[PathLike]
    key: Optional[PathLike]
    server_name: Optional[str]


@dataclass(frozen=True)
class TLS:
    """TLS settings for a TCP daemon (`kerncapd --listen ... --tls-cert ...`).

    ca:    PEM bundle of the CA that signed the daemon's certificate
           (None: the system's roots)
    cert, key: client certificate and key (mutual TLS; both or neither)
    server_name: name to check the daemon's certificate against, when it is
           not the host part of the target (e.g. connecting by IP address)
    """

    ca: Optional[PathLike] = None
    cert: Optional[PathLike] = None
    key: Optional[PathLike] = None
    server_name: Optional[str] = None

    @classmethod
    def coerce(cls, value: "TLSArg") -> Optional["TLS"]:
        """None/True -> TLS with defaults; False -> None (plaintext); a path
        -> TLS(ca=path); a dict -> TLS(**dict); a TLS -> itself."""
        if value is None or value is True:
            return cls()
        if value is False:
            return None
        if isinstance(value, TLS):
            return value
        if isinstance(value, dict):
            return cls(**value)
        if isinstance(value, (str, os.PathLike)):
            return cls(ca=value)
        raise errors.InvalidArgument(f"tls: expected None, a bool, a CA path, a dict or "
                                     f"kerncap.TLS, not {type(value).__name__}")


# connect(tls=...): None/True (TLS, the system's roots), False (plaintext), a CA
# path, a dict of TLS's fields, or a TLS.
TLSArg = Union[None, bool, PathLike, TLSOptions, TLS]


def _read(path: PathLike, what: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except FileNotFoundError:
        raise errors.NotFound(f"{what} {os.fspath(path)}: no such file") from None
    except PermissionError:
        raise errors.PermissionDenied(f"{what} {os.fspath(path)}: permission denied") from None


def read_token_file(path: PathLike) -> str:
    """First line, whitespace stripped (as kerncapd and kerncapctl read it)."""
    text = _read(path, "token file").decode("utf-8", "replace")
    first = text.split("\n", 1)[0].strip()
    if not first:
        raise errors.InvalidArgument(f"token file {os.fspath(path)} is empty")
    return first


@dataclass
class ChannelSpec:
    endpoint: Endpoint
    credentials: Optional[grpc.ChannelCredentials]  # None: insecure
    options: List[ChannelOption]
    metadata: Tuple[Tuple[str, str], ...]


def check_unix_socket(endpoint: Endpoint) -> None:
    """Fails early and clearly, as kerncapctl does, instead of letting gRPC
    retry a socket that does not exist."""
    path = endpoint.unix_path
    try:
        os.stat(path)
    except PermissionError:
        hint = socket_access_hint(path)
        raise errors.PermissionDenied(
            f"cannot reach {path}: permission denied" + (f" ({hint})" if hint else "")) from None
    except OSError:
        chosen = "" if endpoint.source == "argument" else f" (from {endpoint.source})"
        raise errors.Unavailable(
            f"no kerncapd socket at {path}{chosen} — is kerncapd running? (start it with "
            "`kerncapd`, or pass the socket path to kerncap.connect())") from None
    if not os.access(path, os.R_OK | os.W_OK):
        hint = socket_access_hint(path) or (
            "the socket is mode 0660: join its group, or run as its owner")
        raise errors.PermissionDenied(f"no permission to use {path} ({hint})")


@dataclass(frozen=True)
class Resolved:
    """The endpoint and credentials after the precedence above."""
    endpoint: Endpoint
    tls: TLSArg
    token: Optional[str]
    token_file: Optional[PathLike]
    context: Optional[_contexts.Context]


def resolve(target: Optional[PathLike], *, context: Optional[str] = None, tls: TLSArg = None,
            token: Optional[str] = None, token_file: Optional[PathLike] = None,
            config_path: Optional[str] = None) -> Resolved:
    """Applies the precedence of the module docstring. The contexts file is
    read only when a context is named or could give the endpoint, so an
    explicit target works whatever state the file is in."""
    env_socket = os.environ.get("KERNCAP_SOCKET", "")
    ctx: Optional[_contexts.Context] = None
    cfg: Optional[_contexts.ContextConfig] = None
    if context is not None:
        if not context:
            raise errors.InvalidArgument("context: give a context name (kerncapctl config "
                                         "get-contexts lists them)")
        cfg = _contexts.load(config_path)
        ctx = cfg.find(context)
    elif target is None and not env_socket:
        cfg = _contexts.load(config_path)
        if cfg.current:
            ctx = cfg.find(cfg.current)
            if not (ctx.host or ctx.socket):
                ctx = None  # gives no endpoint, so none of its credentials either
    if target is not None:
        endpoint = parse_target(target)
    elif ctx is not None and (ctx.host or ctx.socket):
        assert cfg is not None
        endpoint = parse_target(ctx.host or f"unix:{ctx.socket}",
                                f'context "{ctx.name}" ({cfg.path})')
    elif env_socket:
        endpoint = parse_target(env_socket, "$KERNCAP_SOCKET")
    else:
        endpoint = parse_target(None, "default")
    if ctx is not None:
        if tls is None and (ctx.insecure or ctx.tls_ca or ctx.tls_cert or ctx.tls_key):
            tls = False if ctx.insecure else TLS(ca=ctx.tls_ca or None,
                                                 cert=ctx.tls_cert or None,
                                                 key=ctx.tls_key or None)
        if token is None and token_file is None and ctx.token_file and not endpoint.is_unix:
            token_file = ctx.token_file
    return Resolved(endpoint, tls, token, token_file, ctx)


def channel_spec(target: Optional[PathLike], *, tls: TLSArg = None,
                 token: Optional[str] = None, token_file: Optional[PathLike] = None,
                 check: bool = True, options: Sequence[ChannelOption] = (),
                 context: Optional[str] = None) -> ChannelSpec:
    import grpc

    r = resolve(target, context=context, tls=tls, token=token, token_file=token_file)
    endpoint, tls, token, token_file = r.endpoint, r.tls, r.token, r.token_file
    opts: List[ChannelOption] = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    metadata: Tuple[Tuple[str, str], ...] = ()
    if endpoint.is_unix:
        if check:
            check_unix_socket(endpoint)
        credentials = None
    else:
        settings = TLS.coerce(tls)
        if settings is None:
            credentials = None  # plaintext: only for daemons started with --insecure-tcp
        else:
            if bool(settings.cert) != bool(settings.key):
                raise errors.InvalidArgument("tls: cert and key go together (mutual TLS)")
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(settings.ca, "tls CA") if settings.ca else None,
                private_key=_read(settings.key, "tls key") if settings.key else None,
                certificate_chain=_read(settings.cert, "tls cert") if settings.cert else None)
            if settings.server_name:
                opts.append(("grpc.ssl_target_name_override", settings.server_name))
    if token_file is not None:
        token = read_token_file(token_file)
    if token:
        metadata = (("authorization", f"Bearer {token}"),)
    opts.extend(options)
    return ChannelSpec(endpoint, credentials, opts, metadata)
