"""Fleet operations over the nodes of a cluster job (docs/CLUSTER.md).

    from kerncap.cluster import Fleet
    job = Fleet(slurm_job="1234")                 # or Fleet(endpoints="nodes.txt", ...)
    job.arm(kernel="matmul", rank=0)              # every node of the job
    got = job.wait(captures=1, timeout=600)
    for c in got.captures: print(c["node"], c["rank"], c["capture_id"])
    got.failed_nodes                              # names of the nodes that did not answer

This runs kerncapctl's fleet commands (`kerncapctl --json arm --slurm-job=...`),
so Python and the command line reach the nodes the same way (srun steps inside
the job, or each node's TLS listener with `endpoints`) with the same bounded
fan-out, per-node deadlines and partial results. kerncapctl is taken from
`kerncapctl=`, else $KERNCAP_KERNCAPCTL, else PATH.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .errors import FailedPrecondition, InvalidArgument, KerncapError, NotFound, Unavailable

# kerncapctl's exit codes (docs/EXIT_CODES.md) -> the client's exceptions.
_EXIT_ERRORS = {2: InvalidArgument, 3: NotFound, 4: Unavailable}


@dataclass
class NodeAnswer:
    node: str
    ok: bool
    seconds: float
    result: Any = None          # the node's JSON document (ok)
    error: Optional[str] = None  # why not (not ok)
    exit_code: int = 0


@dataclass
class FleetResult:
    slurm_job: Optional[str]
    nodes: List[NodeAnswer]
    captures: List[Dict[str, Any]] = field(default_factory=list)  # captures / wait only
    exit_code: int = 0

    @property
    def failed_nodes(self) -> List[str]:
        return [n.node for n in self.nodes if not n.ok]

    @property
    def complete(self) -> bool:
        """Every node answered."""
        return not self.failed_nodes


class Fleet:
    """The nodes of one Slurm job (`slurm_job`) or of an endpoints file
    (`endpoints`: lines "NAME HOST:PORT"; TLS options as for kerncapctl)."""

    def __init__(self, slurm_job: Optional[str] = None, *, endpoints: Optional[str] = None,
                 nodes: Optional[str] = None, node_timeout: float = 30, fanout: int = 16,
                 kerncapctl: Optional[str] = None, tls_ca: Optional[str] = None,
                 token_file: Optional[str] = None, insecure: bool = False) -> None:
        if (slurm_job is None) == (endpoints is None):
            raise InvalidArgument("give slurm_job or endpoints (one of them)")
        self._fleet = [f"--slurm-job={slurm_job}"] if slurm_job is not None else \
            [f"--endpoints={endpoints}"]
        if nodes:
            self._fleet.append(f"--nodes={nodes}")
        self._fleet += [f"--node-timeout={node_timeout}", f"--fanout={fanout}"]
        self._global = ["--json"]
        if tls_ca:
            self._global.append(f"--tls-ca={tls_ca}")
        if token_file:
            self._global.append(f"--token-file={token_file}")
        if insecure:
            self._global.append("--insecure")
        ctl = kerncapctl or os.environ.get("KERNCAP_KERNCAPCTL") or shutil.which("kerncapctl")
        if not ctl:
            raise FailedPrecondition("kerncapctl not found (pass kerncapctl= or set "
                                     "$KERNCAP_KERNCAPCTL)")
        self._ctl: str = ctl
        self._timeout = node_timeout

    def _run(self, command: str, args: Sequence[str], wall: float) -> FleetResult:
        argv = [self._ctl, *self._global, command, *self._fleet, *args]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=wall)
        except subprocess.TimeoutExpired as e:
            raise Unavailable(f"kerncapctl {command} did not finish in {wall:.0f} s") from e
        doc = None
        if r.stdout.strip():
            try:
                doc = json.loads(r.stdout)
            except ValueError as e:
                raise KerncapError(f"kerncapctl {command}: unreadable answer: {r.stdout[:200]}") from e
        if doc is None or "nodes" not in doc:
            message = r.stderr.strip()
            for line in r.stderr.splitlines():
                try:
                    message = json.loads(line)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    continue
            raise _EXIT_ERRORS.get(r.returncode, KerncapError)(message or f"exit {r.returncode}")
        nodes = [NodeAnswer(node=n["node"], ok=n["ok"], seconds=n.get("seconds", 0.0),
                            result=n.get("result"),
                            error=(n.get("error") or {}).get("message"),
                            exit_code=(n.get("error") or {}).get("exit_code", 0))
                 for n in doc["nodes"]]
        return FleetResult(slurm_job=doc.get("slurm_job"), nodes=nodes,
                           captures=doc.get("captures", []), exit_code=r.returncode)

    def _wall(self) -> float:
        return self._timeout * 4 + 60

    def arm(self, kernel: str, *, rank: Optional[int] = None, count: int = 1,
            match: str = "substring", ttl: Optional[str] = None,
            tags: Optional[Dict[str, str]] = None) -> FleetResult:
        args = [f"--kernel={kernel}", f"--count={count}", f"--match={match}"]
        if rank is not None:
            args.append(f"--rank={rank}")
        if ttl:
            args.append(f"--ttl={ttl}")
        for k, v in (tags or {}).items():
            args += ["--tag", f"{k}={v}"]
        return self._run("arm", args, self._wall())

    def disarm_all(self) -> FleetResult:
        return self._run("disarm", ["--all"], self._wall())

    def agents(self) -> FleetResult:
        return self._run("agents", [], self._wall())

    def captures(self, *, kernel: Optional[str] = None) -> FleetResult:
        return self._run("captures", [f"--kernel={kernel}"] if kernel else [], self._wall())

    def wait(self, captures: int = 1, *, timeout: float = 300,
             kernel: Optional[str] = None) -> FleetResult:
        """Until the nodes hold `captures` captures in all (of `kernel`), or
        `timeout` seconds: then the result has fewer and exit_code 4."""
        args = [f"--wait-captures={captures}", f"--wait-timeout={timeout}"]
        if kernel:
            args.append(f"--kernel={kernel}")
        return self._run("wait", args, timeout + self._wall())
