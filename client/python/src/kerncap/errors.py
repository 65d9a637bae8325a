"""Exceptions raised by the kerncap client.

Everything derives from KerncapError. Errors from kerncapd keep the daemon's
message (which names the offending input) and map by gRPC status code; the
classes also derive from the closest builtin exception, so `except
LookupError`, `except TimeoutError`, `except ConnectionError` work as well.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class KerncapError(Exception):
    """Base class. `code` is the gRPC status name ("NOT_FOUND") or None."""

    code: Optional[str] = None

    def __init__(self, message: str, *, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(KerncapError, ValueError):
    code = "INVALID_ARGUMENT"


class OutOfRange(InvalidArgument):
    code = "OUT_OF_RANGE"


class NotFound(KerncapError, LookupError):
    code = "NOT_FOUND"


class AlreadyExists(KerncapError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(KerncapError):
    code = "FAILED_PRECONDITION"


class PermissionDenied(KerncapError, PermissionError):
    code = "PERMISSION_DENIED"


class Unauthenticated(PermissionDenied):
    code = "UNAUTHENTICATED"


class Unavailable(KerncapError, ConnectionError):
    """kerncapd cannot be reached; the message says where it was looked for."""
    code = "UNAVAILABLE"


class DeadlineExceeded(KerncapError, TimeoutError):
    """A call or a wait ran out of time."""
    code = "DEADLINE_EXCEEDED"


class DataLoss(KerncapError):
    """Stored or transferred bytes are damaged (also: a corrupt .kcap file)."""
    code = "DATA_LOSS"


class ResourceExhausted(KerncapError):
    code = "RESOURCE_EXHAUSTED"


class Unimplemented(KerncapError, NotImplementedError):
    code = "UNIMPLEMENTED"


class Cancelled(KerncapError):
    code = "CANCELLED"


class Aborted(KerncapError):
    code = "ABORTED"


class Internal(KerncapError):
    code = "INTERNAL"


class UnknownError(KerncapError):
    code = "UNKNOWN"


# ---- client-side failures that are not gRPC statuses ----

class CaptureFailed(KerncapError):
    """wait_for_capture: the agent or daemon reported that the awaited capture
    failed, or the arm ended without a capture."""

    def __init__(self, message: str, *, arm_id: str = "", capture_id: str = "",
                 reason: str = "") -> None:
        super().__init__(message)
        self.arm_id = arm_id
        self.capture_id = capture_id
        self.reason = reason


class KcapFormatError(DataLoss):
    """A .kcap file is truncated, damaged or not a .kcap file."""


class ReplayError(KerncapError):
    """kerncap-replay could not replay (its exit code 3), or could not be run."""

    def __init__(self, message: str, *, exit_code: Optional[int] = None,
                 stderr: str = "", code: Optional[str] = None) -> None:
        super().__init__(message, code=code)
        self.exit_code = exit_code
        self.stderr = stderr


class ReplayerNotFound(ReplayError, FileNotFoundError):
    """No kerncap-replay binary ($KERNCAP_REPLAY, PATH)."""


class NoDevice(ReplayError):
    """kerncap-replay found no CUDA driver / GPU (or no usable HSA runtime):
    its exit code 77."""


_BY_CODE: Dict[grpc.StatusCode, Type[KerncapError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNKNOWN: UnknownError,
}


def from_rpc_error(error: grpc.RpcError, where: str) -> KerncapError:
    """Converts a failed call. `where` is "socket /run/kerncap/kerncapd.sock"
    or "host node17:7443"; unreachable-daemon errors name it."""
    try:
        status = error.code()
        details = error.details() or ""
    except Exception:  # not a call object (should not happen)
        return UnknownError(f"{error} ({where})")
    cls = _BY_CODE.get(status, UnknownError)
    if cls is Unavailable:
        message = (f"cannot reach kerncapd at {where} ({details}) — is kerncapd running? "
                   "Start it with `kerncapd`, or pass its socket/host to kerncap.connect()")
    elif cls is DeadlineExceeded:
        message = (f"kerncapd at {where} did not answer in time ({details}); "
                   "see the timeout argument of kerncap.connect()")
    elif cls is Unauthenticated or cls is PermissionDenied:
        message = f"{details} ({where})"
    else:
        message = details or status.name
    err = cls(message, code=status.name)
    err.grpc_code = status  # type: ignore[attr-defined]
    return err
