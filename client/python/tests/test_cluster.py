"""kerncap.cluster over real kerncapd instances on loopback TCP (the
--endpoints transport; the Slurm transport is tests/slurm's)."""
from __future__ import annotations

import shutil

import pytest

from conftest import Daemon, binary, free_port, require, short_tmpdir
from kerncap.cluster import Fleet
from kerncap.errors import InvalidArgument


@pytest.fixture(scope="module")
def fleet_daemons():
    require("kerncapd", "kerncapctl", "synthetic_agent")
    ds = []
    try:
        for i in range(3):
            port = free_port()
            d = Daemon(short_tmpdir(f"kcfleet{i}-"),
                       [f"--listen=127.0.0.1:{port}", "--insecure-tcp"])
            d.port = port
            ds.append(d)
        yield ds
    finally:
        for d in ds:
            d.stop()
            shutil.rmtree(d.dir, ignore_errors=True)


def endpoints(tmp_path, ds, dead_port=None):
    p = tmp_path / "nodes.txt"
    lines = [f"n{i} 127.0.0.1:{d.port}" for i, d in enumerate(ds)]
    if dead_port:
        lines.append(f"gone 127.0.0.1:{dead_port}")
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_arm_and_captures_come_back_per_node(fleet_daemons, tmp_path):
    f = Fleet(endpoints=endpoints(tmp_path, fleet_daemons), insecure=True,
              kerncapctl=binary("kerncapctl"), node_timeout=10)
    armed = f.arm(kernel="fleet_kernel", count=1)
    assert armed.complete and len(armed.nodes) == 3
    assert all(n.result["arm_id"] for n in armed.nodes)
    for d in fleet_daemons[:2]:  # two of the three nodes run the kernel
        d.run_agent(kernels="fleet_kernel", dispatches=2)
    got = f.wait(captures=2, timeout=30, kernel="fleet_kernel")
    assert got.exit_code == 0
    assert sorted(c["node"] for c in got.captures) == ["n0", "n1"]
    assert all(c["rank"] is None for c in got.captures)  # no launcher rank in the env
    f.disarm_all()


def test_a_node_that_does_not_answer_is_named(fleet_daemons, tmp_path):
    from conftest import free_port as fp
    f = Fleet(endpoints=endpoints(tmp_path, fleet_daemons, dead_port=fp()), insecure=True,
              kerncapctl=binary("kerncapctl"), node_timeout=5)
    r = f.agents()
    assert r.failed_nodes == ["gone"]
    assert r.exit_code == 4
    assert [n.ok for n in r.nodes] == [True, True, True, False]


def test_bad_input_is_refused():
    with pytest.raises(InvalidArgument):
        Fleet()
    with pytest.raises(InvalidArgument):
        Fleet(slurm_job="1", endpoints="x")
