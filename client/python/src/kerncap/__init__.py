"""kerncap: Python client for kerncapd (GPU kernel capture, replay, reproducers).

    import kerncap
    c = kerncap.connect()                     # local daemon (kerncapctl's default socket)
    arm = c.arm(kernel="matmul")
    cap = c.wait_for_capture(arm, timeout=60)
    cap                                       # a table in notebooks
    cap.memory_map()                          # pandas DataFrame when pandas is installed
    c.export(cap, "matmul.kcap")
    c.validate(cap)                           # runs kerncap-replay on a GPU

Async variants: kerncap.aio. Errors: kerncap.KerncapError and subclasses
(NotFound, InvalidArgument, Unavailable, DataLoss, ...). Protobuf messages:
kerncap.pb.
"""
from ._connection import TLS, default_socket_path
from ._pb import pb
from ._vocab import EXIT_CODES, message_to_json
from .capture import Argument, Capture, CaptureStats, CodeObject, KernelInfo, LaunchConfig, Region
from .client import Client, connect
from .errors import (Aborted, AlreadyExists, CaptureFailed, Cancelled, DataLoss,
                     DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
                     KcapFormatError, KerncapError, NoDevice, NotFound, OutOfRange,
                     PermissionDenied, ReplayError, ReplayerNotFound, ResourceExhausted,
                     Unauthenticated, Unavailable, Unimplemented, UnknownError)
from .kcap import KcapReader, KcapWriter
from .models import (Agent, AgentList, Arm, ArmList, CaptureList, CaptureSummary, DaemonStatus,
                     Event, ExportResult, GcReport, ImportResult, KernelList, LoadedKernel,
                     ReproResult, SampledLaunchConfig, Selector, VerifyReport)
from .replayer import (BenchResult, ReplayResult, ValidationResult, bench, find_replayer, replay,
                       validate)

__version__ = "0.1.0"

# Short alias: `except kerncap.Timeout`.
Timeout = DeadlineExceeded

__all__ = [
    # connecting
    "connect", "Client", "TLS", "default_socket_path", "pb",
    # the JSON policy (docs/JSON.md) and the exit-code table (docs/EXIT_CODES.md)
    "message_to_json", "EXIT_CODES",
    # captures
    "Capture", "Argument", "CaptureStats", "CodeObject", "KernelInfo", "LaunchConfig", "Region",
    # listings and results
    "Agent", "AgentList", "Arm", "ArmList", "CaptureList", "CaptureSummary", "DaemonStatus",
    "Event", "ExportResult", "GcReport", "ImportResult", "KernelList", "LoadedKernel",
    "ReproResult", "SampledLaunchConfig", "Selector", "VerifyReport",
    # .kcap files
    "KcapReader", "KcapWriter",
    # kerncap-replay
    "replay", "validate", "bench", "find_replayer", "ReplayResult", "ValidationResult",
    "BenchResult",
    # errors
    "KerncapError", "Aborted", "AlreadyExists", "CaptureFailed", "Cancelled", "DataLoss",
    "DeadlineExceeded", "FailedPrecondition", "Internal", "InvalidArgument", "KcapFormatError",
    "NoDevice", "NotFound", "OutOfRange", "PermissionDenied", "ReplayError", "ReplayerNotFound",
    "ResourceExhausted", "Timeout", "Unauthenticated", "Unavailable", "Unimplemented",
    "UnknownError",
]
