# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/slurmrestd.py and the slurm_jwt lookup against a real slurmrestd (lab).

Skipped unless these are set:

* HYBRIDHPC_SLURMRESTD_URL: slurmrestd's base URL, e.g. http://172.19.0.2:6820
* HYBRIDHPC_JWT_KEY_FILE: a copy of the cluster's JWT key (jwt_hs256.key) on
  this machine, e.g. ``docker cp lab-ctl1:/etc/slurm/jwt_hs256.key .`` (slurm_jwt_key_file of the slurm_common role)

Optional: HYBRIDHPC_SLURMRESTD_USER (default root; node updates need an
administrator), HYBRIDHPC_SLURM_PARTITION (default: the cluster's default
partition), HYBRIDHPC_SLURM_CLUSTER_CONSTRAINT (a federation member: a feature
only this cluster has, as sbatch --cluster-constraint; else any sibling may run
the test job and the member the test asks forgets its revoked copy),
HYBRIDHPC_SLURM_NODE (node to drain and resume; default: the
first idle node), HYBRIDHPC_JOB_TIMEOUT (seconds to wait for the test job,
default 180).

The tests change the cluster only briefly: one small batch job, and one node
drained and resumed (resumed again on failure).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import time

import pytest

URL = os.environ.get("HYBRIDHPC_SLURMRESTD_URL")
KEY_FILE = os.environ.get("HYBRIDHPC_JWT_KEY_FILE")
USER = os.environ.get("HYBRIDHPC_SLURMRESTD_USER", "root")
PARTITION = os.environ.get("HYBRIDHPC_SLURM_PARTITION")
CLUSTER_CONSTRAINT = os.environ.get("HYBRIDHPC_SLURM_CLUSTER_CONSTRAINT")
NODE = os.environ.get("HYBRIDHPC_SLURM_NODE")
JOB_TIMEOUT = float(os.environ.get("HYBRIDHPC_JOB_TIMEOUT", "180"))
DRAIN_REASON = "hybridhpc.slurm live test"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        not (URL and KEY_FILE),
        reason="HYBRIDHPC_SLURMRESTD_URL and HYBRIDHPC_JWT_KEY_FILE are not set (slurmrestd base URL, e.g. "
        "http://<controller-ip>:6820, and a copy of the cluster's jwt_hs256.key)",
    ),
]

httpx = pytest.importorskip("httpx")

from ansible import constants as C  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402

from ansible_collections.hybridhpc.slurm.plugins.lookup import slurm_jwt  # noqa: E402
from ansible_collections.hybridhpc.slurm.plugins.module_utils import jwt  # noqa: E402
from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurmrestd as sr  # noqa: E402


def lookup_token(username=USER, lifespan=300):
    """A token signed by the slurm_jwt lookup, as a playbook would get it."""
    import yaml

    name = "hybridhpc.slurm.slurm_jwt"
    C.config.initialize_plugin_configuration_definitions("lookup", name, yaml.safe_load(slurm_jwt.DOCUMENTATION)["options"])
    plugin = slurm_jwt.LookupModule(loader=DataLoader())
    plugin._load_name = name
    return plugin.run([], {}, username=username, key_file=KEY_FILE, lifespan=lifespan)[0]


def key_bytes():
    with open(KEY_FILE, "rb") as handle:
        return handle.read()


def version_key(version):
    return tuple(int(n) for n in version[1:].split("."))


@pytest.fixture(scope="module")
def served():
    """The data_parser versions this slurmrestd serves (GET /openapi/v3), oldest first."""
    with sr.SlurmrestdClient(URL, USER, token=lookup_token()) as c:
        versions = c.served_versions()
    assert versions, "GET /openapi/v3 named no API version"
    return versions


@pytest.fixture(scope="module")
def spoken(served):
    """The versions both sides speak; the tests that talk to Slurm skip when there is none (Slurm before 23.11)."""
    common = [v for v in served if v in sr.DEFAULT_VERSIONS]
    if not common:
        pytest.skip("slurmrestd serves %s, none of the client's %s" % (", ".join(served), ", ".join(sr.DEFAULT_VERSIONS)))
    return common


@pytest.fixture
def client(spoken):
    with sr.SlurmrestdClient(URL, USER, token=lookup_token()) as c:
        yield c


def test_the_client_speaks_the_newest_version_served_or_says_why_not(served):
    """24.11 serves v0.0.40-42 and gets v0.0.42; 26.05 gets v0.0.45; 22.05 (v0.0.36-38) is told no, with what it serves."""
    common = [v for v in served if v in sr.DEFAULT_VERSIONS]
    with sr.SlurmrestdClient(URL, USER, token=lookup_token()) as c:
        if common:
            assert c.version == max(common, key=version_key)
            return
        with pytest.raises(sr.UnsupportedVersion) as err:
            c.version  # noqa: B018 - the property probes the server
    message = str(err.value)
    assert "it serves %s" % ", ".join(served) in message, message
    assert "Slurm 23.11 and later" in message, message


def test_ping_answers_up_with_a_signed_token(client):
    pings = client.check_auth()
    assert any(sr.ping_up(p) for p in pings), pings
    assert client.version in sr.DEFAULT_VERSIONS


def test_nodes(client):
    nodes = client.nodes()
    assert nodes, "the cluster has no nodes"
    for node in nodes:
        assert node["name"]
        assert sr.node_states(node), node
    first = nodes[0]["name"]
    assert client.node(first)["name"] == first
    assert client.node("hybridhpc-no-such-node") is None


def test_submit_a_job_and_wait_for_it(client):
    fields = {
        "name": "hybridhpc-live",
        "current_working_directory": "/tmp",
        "environment": {"PATH": "/usr/bin:/bin", "HYBRIDHPC": "1"},
        "nodes": "1",
        "tasks": 1,
        "time_limit": 2,
        "standard_output": "/tmp/hybridhpc-live-%j.out",
    }
    if PARTITION:
        fields["partition"] = PARTITION
    if CLUSTER_CONSTRAINT:
        fields["cluster_constraint"] = CLUSTER_CONSTRAINT
    job_id = client.submit_job("#!/bin/sh\necho hybridhpc live test on $(hostname)\n", **fields)
    assert job_id > 0
    assert job_id in [j.get("job_id") for j in client.jobs()]

    deadline = time.monotonic() + JOB_TIMEOUT
    seen = []
    job = client.job(job_id)
    while job is not None and not sr.job_finished(job):
        seen.append(tuple(sr.job_states(job)))
        assert time.monotonic() < deadline, "job %d not finished after %ss; states seen: %s" % (
            job_id, JOB_TIMEOUT, sorted(set(seen)))
        time.sleep(1)
        job = client.job(job_id)
    assert job is not None, "slurmctld forgot job %d before the test saw it end (MinJobAge?)" % job_id
    assert "COMPLETED" in sr.job_states(job), job
    assert job["name"] == "hybridhpc-live"
    assert client.job(2**31 - 7) is None, "an unknown job id reads as None"


def test_drain_and_resume_a_node(client):
    name = NODE
    if not name:
        idle = [n for n in client.nodes() if sr.node_states(n) == ["IDLE"]]
        if not idle:
            pytest.skip("no idle node to drain")
        name = idle[0]["name"]
    before = client.node(name)
    assert "DRAIN" not in sr.node_states(before), "node %s is already drained: %s" % (name, before.get("reason"))
    try:
        client.drain_node(name, DRAIN_REASON)
        drained = client.node(name)
        assert "DRAIN" in sr.node_states(drained), drained
        assert drained.get("reason") == DRAIN_REASON
    finally:
        current = client.node(name)
        if "DRAIN" in sr.node_states(current):
            client.resume_node(name)
    resumed = client.node(name)
    assert "DRAIN" not in sr.node_states(resumed), resumed


def test_without_token_is_401(spoken):
    with sr.SlurmrestdClient(URL, USER, token=None, versions=(spoken[-1],)) as c:
        with pytest.raises(sr.AuthenticationRequired) as err:
            c.nodes()
    assert err.value.status == 401


def test_expired_token_is_rejected(spoken):
    expired = jwt.sign_hs256_token(key_bytes(), USER, 60, now=int(time.time()) - 3600)
    with sr.SlurmrestdClient(URL, USER, token=expired) as c:
        pings = c.ping()
        assert pings and not any(sr.ping_up(p) for p in pings), "ping answers DOWN for a rejected token"
        with pytest.raises(sr.TokenRejected) as err:
            c.nodes()
        assert err.value.status == 511
        with pytest.raises(sr.TokenRejected):
            c.check_auth()


def test_token_of_another_key_is_rejected(spoken):
    forged = jwt.sign_hs256_token(key_bytes()[::-1] + b"x", USER, 300)
    with sr.SlurmrestdClient(URL, USER, token=forged) as c:
        with pytest.raises(sr.TokenRejected):
            c.nodes()


def test_token_provider_replaces_an_expired_token(spoken):
    expired = jwt.sign_hs256_token(key_bytes(), USER, 60, now=int(time.time()) - 3600)
    fresh = []

    def provider():
        fresh.append(lookup_token(lifespan=120))
        return fresh[-1]

    with sr.SlurmrestdClient(URL, USER, token=expired, token_provider=provider) as c:
        assert c.nodes()
    assert len(fresh) == 1
