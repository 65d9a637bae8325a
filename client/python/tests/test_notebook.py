"""Runs examples/kerncap_quickstart.ipynb headless (nbclient) against the test
kerncapd, with the synthetic agent as the application."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import kerncap
from conftest import binary

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "kerncap_quickstart.ipynb"


@pytest.mark.notebook
def test_quickstart_notebook_runs(daemon, tmpdir_short, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # The kernel inherits this environment: the default socket is the test
    # daemon's, and the synthetic agent plays the application.
    monkeypatch.setenv("KERNCAP_SOCKET", daemon.socket)
    monkeypatch.setenv("KERNCAP_DEMO_AGENT", daemon.bins["synthetic_agent"])
    replayer = binary("kerncap-replay")
    if replayer:
        monkeypatch.setenv("KERNCAP_REPLAY", replayer)
    # A kernel spec for this very interpreter: the system's "python3" spec
    # may name another Python (Debian's names /usr/bin/python3) that does not
    # see the environment kerncap is installed in.
    spec_dir = Path(tmpdir_short) / "jupyter" / "kernels" / "kerncap-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "kerncap tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(Path(tmpdir_short) / "jupyter"))
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="kerncap-test",
                                     resources={"metadata": {"path": tmpdir_short}})
    client.execute()

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    # c.agents(...) right after the application started lists it.
    (agents_cell,) = [c for c in nb.cells if c.cell_type == "code" and "c.agents(" in c.source]
    listed = "".join(o.get("data", {}).get("text/html", "") for o in agents_cell.outputs)
    assert "synthetic_agent" in listed, listed
    assert "kerncapd status" in html and "memory map" in html and "matmul_bf16" in html
    assert any("image/png" in o.get("data", {}) for o in outputs), "no memory map plot"
    kcap_file = Path(tmpdir_short) / "matmul.kcap"  # the notebook ran in tmpdir_short
    assert kcap_file.is_file()
    cap = kerncap.Capture.from_kcap(kcap_file)
    assert cap.kernel.name == "matmul_bf16" and cap.tags == {"notebook": "quickstart"}
    assert kerncap.kcap.verify(kcap_file)[0] > 0
    # The notebook left no outputs in the file it was read from.
    assert '"outputs": []' in NOTEBOOK.read_text()
