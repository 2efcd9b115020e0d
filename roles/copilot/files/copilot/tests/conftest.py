"""Make the copilot (src layout) and the API server double importable; vendor the Slurm client first."""

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
COLLECTION = PACKAGE.parents[3]

subprocess.run(["sh", str(PACKAGE / "tools" / "vendor.sh")], check=True, stdout=subprocess.DEVNULL,
               env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
for path in (PACKAGE / "src", COLLECTION / "tests", HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


import pytest  # noqa: E402
import yaml  # noqa: E402

CRD_FILE = PACKAGE / "crd" / "genericnodes.kai.alibabacloud.com.yaml"


@pytest.fixture
def api_server():
    """The API server double with the GenericNode CRD installed."""
    from k8s_double import ApiServer

    with ApiServer(bookmark_interval=0.5) as server:
        server.load([yaml.safe_load(CRD_FILE.read_text())])
        yield server


@pytest.fixture
def kubeconfig(api_server, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(api_server.kubeconfig())
    return str(path)
