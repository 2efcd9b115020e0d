# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/slurmrestd.py.

The client talks to the collection's one fake slurmrestd
(``tests/fakes/slurmrestd.py``, over Slurm's state in
``tests/fakes/slurm_state.py``) through its httpx transport (no network). It
answers the way slurmrestd 24.11 in front of slurmctld does on the lab (Slurm
24.11.5): /slurm/v0.0.40-42 only (404 otherwise), 401 without a token,
``/ping`` 200 with ``pinged: DOWN`` for a token slurmctld rejects and 511 for
every other path, Slurm errors as HTTP 500 with an ``errors`` list, node
updates only for administrators.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import dataclasses
import os
import pathlib
import subprocess
import sys

import httpx
import pytest
import yaml
from fakes.slurm_state import FakeNode, FakeSlurm
from fakes.slurmrestd import FakeSlurmrestd

from ansible_collections.hybridhpc.slurm.plugins.doc_fragments.slurmrestd import ModuleDocFragment
from ansible_collections.hybridhpc.slurm.plugins.module_utils import jwt
from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurmrestd as sr

KEY = b"k" * 32
NOW = 1_700_000_000
URL = "http://ctl1:6820"


def token(user="root", lifespan=300, now=NOW, key=KEY):
    return jwt.sign_hs256_token(key, user, lifespan, now=now)


def slurm_error(description, error, number, source):
    return {"description": description, "error": error, "error_number": number, "source": source}


def fake_slurmrestd(versions=("v0.0.40", "v0.0.41", "v0.0.42"), users=("root", "slurm", "alice")):
    """The collection's fake slurmrestd (tests/fakes) as slurmrestd 24.11 on the lab, over two stock nodes (no k8s GRES)."""
    slurm = FakeSlurm([FakeNode("c1", 64, 256000, other_gres="gpu:2", gres_shared=False, features=["x86_64"], weight=1),
                       FakeNode("c2", 64, 256000, gres_shared=False, features=[], weight=1)], first_job_id=100)
    return FakeSlurmrestd(slurm, listen=False, jwt_key=KEY, versions=versions, users=users, clock=lambda: NOW + 10)


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def fake():
    return fake_slurmrestd()


@pytest.fixture
def sleeps():
    return Sleeps()


def make(fake, sleeps=None, **kwargs):
    kwargs.setdefault("token", token())
    kwargs.setdefault("user", "root")
    return sr.SlurmrestdClient(URL, transport=fake.transport(), sleep=sleeps if sleeps is not None else Sleeps(), **kwargs)


# --------------------------------------------------------------------------
# Version probing


def test_probes_newest_version_first_and_caches_it(fake):
    client = make(fake)
    assert client.version == "v0.0.42"
    client.nodes()
    client.nodes()
    # Slurm 24.11: the three newer versions the client speaks answer 404.
    assert [r.path for r in fake.requests] == [
        "/slurm/v0.0.45/ping", "/slurm/v0.0.44/ping", "/slurm/v0.0.43/ping", "/slurm/v0.0.42/ping",
        "/slurm/v0.0.42/nodes", "/slurm/v0.0.42/nodes"]


@pytest.mark.parametrize(
    ("served", "chosen"),
    [
        # As each lab's slurmrestd lists them in GET /openapi/v3.
        (("v0.0.40", "v0.0.41", "v0.0.42"), "v0.0.42"),             # 24.11
        (("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"), "v0.0.45"),  # 26.05
        (("v0.0.41", "v0.0.42", "v0.0.43"), "v0.0.43"),             # 25.05
        (("v0.0.38", "v0.0.39", "v0.0.40"), "v0.0.40"),             # 23.11
    ],
)
def test_chooses_the_newest_version_the_server_serves(served, chosen):
    fake = fake_slurmrestd(versions=served)
    client = make(fake)
    assert client.version == chosen
    assert client.nodes()[0]["name"] == "c1"
    assert fake.requests[-1].path == "/slurm/%s/nodes" % chosen


def test_falls_back_to_an_older_version_on_404():
    fake = fake_slurmrestd(versions=("v0.0.40",))
    client = make(fake)
    assert client.version == "v0.0.40"
    assert [r.path for r in fake.requests] == [
        "/slurm/v0.0.45/ping", "/slurm/v0.0.44/ping", "/slurm/v0.0.43/ping",
        "/slurm/v0.0.42/ping", "/slurm/v0.0.41/ping", "/slurm/v0.0.40/ping"]
    assert client.nodes()[0]["name"] == "c1"
    assert fake.requests[-1].path == "/slurm/v0.0.40/nodes"


def test_no_supported_version_names_what_the_server_serves():
    # Slurm 22.05 (bookworm): v0.0.36-v0.0.38 only.
    fake = fake_slurmrestd(versions=("v0.0.36", "v0.0.37", "v0.0.38"))
    client = make(fake)
    with pytest.raises(sr.UnsupportedVersion) as err:
        client.ping()
    assert "v0.0.45, v0.0.44, v0.0.43, v0.0.42, v0.0.41, v0.0.40" in str(err.value)
    assert "it serves v0.0.36, v0.0.37, v0.0.38 (GET /openapi/v3): this client speaks v0.0.40 to v0.0.45" in str(err.value)
    assert err.value.status == 404
    assert fake.requests[-1].path == "/openapi/v3"


def test_no_supported_version_and_no_openapi_answer():
    fake = fake_slurmrestd(versions=("v0.0.39",))
    client = make(fake)
    fake.inject = [(404, "no such path")] * 6 + [(500, "no spec")]
    with pytest.raises(sr.UnsupportedVersion) as err:
        client.ping()
    assert str(err.value).endswith("(all answered 404); check the data_parser plugins it loads")


def test_a_401_does_not_choose_a_version(fake):
    client = make(fake, token=None)
    with pytest.raises(sr.AuthenticationRequired):
        client.ping()
    assert client._version is None, "slurmrestd answers 401 before it routes: the version is still unknown"
    client.token = token("root")
    assert client.version == "v0.0.42"


def test_openapi_versions():
    spec = {"paths": {"/slurm/v0.0.45/ping": {}, "/slurm/v0.0.42/nodes": {}, "/slurmdb/v0.0.44/jobs": {},
                      "/openapi/v3": {}, "/util/v0.0.45/hostnames": {}, "/slurm/latest/ping": {}}}
    assert sr.openapi_versions(spec) == ["v0.0.42", "v0.0.44", "v0.0.45"]
    assert sr.openapi_versions({}) == []
    assert sr.openapi_versions(None) == []


@pytest.mark.parametrize(
    ("entry", "up"),
    [
        ({"hostname": "c", "pinged": "UP", "responding": True, "mode": "primary"}, True),
        ({"hostname": "c", "pinged": "DOWN", "responding": False, "mode": "primary"}, False),
        # v0.0.45 (Slurm 26.05.5): no "pinged", a "status" text.
        ({"hostname": "c", "responding": True, "primary": True, "status": "No error"}, True),
        ({"hostname": "c", "responding": False, "primary": True, "status": "Protocol authentication error"}, False),
    ],
)
def test_ping_up_every_version(entry, up):
    assert sr.ping_up(entry) is up


def test_versions_can_be_chosen(fake):
    client = make(fake, versions=("v0.0.41",))
    assert client.version == "v0.0.41"
    with pytest.raises(ValueError):
        make(fake, versions=())


# --------------------------------------------------------------------------
# Authentication


def test_headers_carry_user_and_token(fake):
    tok = token("root")
    make(fake, token=tok, user="root").nodes()
    headers = fake.requests[-1].headers
    assert headers["x-slurm-user-name"] == "root"
    assert headers["x-slurm-user-token"] == tok


def test_user_defaults_to_the_token_sun_claim(fake):
    make(fake, token=token("slurm"), user=None).nodes()
    assert fake.requests[-1].headers["x-slurm-user-name"] == "slurm"


def test_no_token_is_401_authentication_required(fake):
    client = make(fake, token=None)
    with pytest.raises(sr.AuthenticationRequired) as err:
        client.nodes()
    assert err.value.status == 401
    assert "no token sent" in str(err.value)
    assert "x-slurm-user-token" not in fake.requests[-1].headers
    assert len(fake.requests) == 1, "a 401 is not retried"


@pytest.mark.parametrize("bad", [
    token(key=b"another key" * 3),           # wrong key
    token(now=NOW - 1000, lifespan=60),      # expired
    token(user="nobody"),                    # unknown user
])
def test_rejected_token_is_511_token_rejected(fake, bad):
    client = make(fake, token=bad, user=None)
    assert client.version == "v0.0.42", "ping answers 200 even for a bad token"
    with pytest.raises(sr.TokenRejected) as err:
        client.nodes()
    assert err.value.status == 511
    assert "token rejected: expired, wrong key, or unknown user" in str(err.value)
    assert err.value.errors[0]["error_number"] == 1007


def test_ping_with_a_bad_token_says_down(fake):
    pings = make(fake, token=token(now=NOW - 1000, lifespan=60)).ping()
    assert pings[0]["pinged"] == "DOWN" and not sr.ping_up(pings[0])


def test_check_auth_tells_bad_token_from_controller_down(fake):
    assert sr.ping_up(make(fake).check_auth()[0])

    with pytest.raises(sr.TokenRejected):
        make(fake, token=token(key=b"wrong" * 8)).check_auth()

    fake.slurm.controller_up = False
    with pytest.raises(sr.SlurmError) as err:
        make(fake).check_auth()
    assert not isinstance(err.value, sr.TokenRejected)
    assert "no slurmctld answers ping (ctl1)" in str(err.value)
    assert "Unable to contact slurm controller" in str(err.value)


def test_token_provider_refreshes_once_after_511(fake):
    fresh = []

    def provider():
        fresh.append(token(now=fake.now()))
        return fresh[-1]

    client = make(fake, token=token(now=NOW - 1000, lifespan=60), token_provider=provider)
    nodes = client.nodes()
    assert [n["name"] for n in nodes] == ["c1", "c2"]
    assert len(fresh) == 1
    assert client.token == fresh[0]
    assert fake.requests[-1].headers["x-slurm-user-token"] == fresh[0]
    statuses = [r.path for r in fake.calls(path="/slurm/v0.0.42/nodes")]
    assert len(statuses) == 2, "the refused request, then the retried one"


def test_token_provider_is_called_once_only(fake):
    calls = []

    def provider():
        calls.append(1)
        return token(key=b"still wrong" * 3)

    client = make(fake, token=token(key=b"wrong" * 8), token_provider=provider)
    with pytest.raises(sr.TokenRejected):
        client.nodes()
    assert len(calls) == 1


def test_token_provider_supplies_the_first_token_and_refreshes_after_401(fake):
    calls = []

    def provider():
        calls.append(1)
        return token(now=fake.now())

    client = make(fake, token=None, token_provider=provider)
    assert client.nodes()
    assert len(calls) == 1
    assert fake.requests[0].headers["x-slurm-user-token"] == client.token

    # a provider that has nothing to give
    with pytest.raises(sr.AuthenticationRequired):
        make(fake, token=None, token_provider=lambda: "").nodes()


# --------------------------------------------------------------------------
# Retries


def test_retries_503_then_succeeds_with_exponential_backoff(fake, sleeps):
    client = make(fake, sleeps)
    client.version  # noqa: B018 - probe first
    fake.inject = [(503, {}), (503, {})]
    assert [n["name"] for n in client.nodes()] == ["c1", "c2"]
    assert sleeps == [0.5, 1.0]
    assert len(fake.calls(path="/slurm/v0.0.42/nodes")) == 3


def test_retries_are_bounded(fake, sleeps):
    client = make(fake, sleeps, retries=2, backoff=0.1)
    client.version  # noqa: B018
    fake.inject = [(502, {}), (504, {}), (503, {}), (503, {})]
    with pytest.raises(sr.SlurmrestdUnavailable) as err:
        client.nodes()
    assert err.value.status == 503
    assert sleeps == [0.1, 0.2]
    assert len(fake.calls(path="/slurm/v0.0.42/nodes")) == 3


def test_backoff_is_capped(fake, sleeps):
    client = make(fake, sleeps, retries=8, backoff=10)
    client.version  # noqa: B018
    fake.inject = [(503, {})] * 8
    client.nodes()
    assert sleeps == [10, 20, 30, 30, 30, 30, 30, 30]


def test_connection_errors_are_retried(fake, sleeps):
    fake.inject = [httpx.ConnectError, httpx.ConnectTimeout]
    client = make(fake, sleeps)
    assert client.version == "v0.0.42"
    assert sleeps == [0.5, 1.0]


def test_unreachable_slurmrestd(fake, sleeps):
    fake.inject = [httpx.ConnectError] * 4
    with pytest.raises(sr.SlurmrestdUnavailable) as err:
        make(fake, sleeps).ping()
    assert "cannot reach slurmrestd at http://ctl1:6820" in str(err.value)
    assert err.value.status is None
    assert len(fake.requests) == 4


def test_no_retry_on_500_slurm_error(fake, sleeps):
    client = make(fake, sleeps)
    client.version  # noqa: B018
    fake.inject = [(500, {"errors": [slurm_error("Failure to query nodes", "Zero Bytes were transmitted or received",
                                                 1014, "_dump_nodes")]})]
    with pytest.raises(sr.SlurmError) as err:
        client.nodes()
    assert sleeps == []
    assert err.value.status == 500
    assert "Failure to query nodes: Zero Bytes were transmitted or received (error 1014, from _dump_nodes)" in str(err.value)
    assert len(fake.calls(path="/slurm/v0.0.42/nodes")) == 1


@pytest.mark.parametrize("status", [400, 403, 405, 415, 422])
def test_no_retry_on_4xx(fake, sleeps, status):
    client = make(fake, sleeps)
    client.version  # noqa: B018
    fake.inject = [(status, {"errors": [slurm_error("bad request", "Invalid query", 9000, "x")]})]
    with pytest.raises(sr.SlurmError) as err:
        client.nodes()
    assert err.value.status == status
    assert sleeps == []


def test_job_submission_is_not_repeated_when_it_may_have_reached_slurm(fake, sleeps):
    client = make(fake, sleeps)
    client.version  # noqa: B018
    fake.inject = [(502, {})]
    with pytest.raises(sr.SlurmrestdUnavailable):
        client.submit_job("#!/bin/sh\ntrue\n")
    fake.inject = [httpx.ReadTimeout]
    with pytest.raises(sr.SlurmrestdUnavailable):
        client.submit_job("#!/bin/sh\ntrue\n")
    assert fake.slurm.jobs == {}
    assert sleeps == []
    # ... but repeated when it cannot have: connection refused, or 503
    fake.inject = [httpx.ConnectError, (503, {})]
    assert client.submit_job("#!/bin/sh\ntrue\n") == 100
    assert sleeps == [0.5, 1.0]


def test_reads_are_repeated_after_a_read_timeout(fake, sleeps):
    client = make(fake, sleeps)
    client.version  # noqa: B018
    fake.inject = [httpx.ReadTimeout, httpx.RemoteProtocolError]
    assert len(client.nodes()) == 2
    assert sleeps == [0.5, 1.0]


# --------------------------------------------------------------------------
# Errors


def test_errors_list_in_a_200_answer_is_a_slurm_error(fake):
    client = make(fake)
    client.version  # noqa: B018
    fake.inject = [(200, {"nodes": [], "errors": [slurm_error("Something odd", "Unspecified error", 1, "x")]})]
    with pytest.raises(sr.SlurmError) as err:
        client.nodes()
    assert err.value.status == 200
    assert "Something odd: Unspecified error" in str(err.value)


def test_unknown_endpoint_is_not_found(fake):
    client = make(fake)
    with pytest.raises(sr.NotFound) as err:
        client.request("GET", "no/such/endpoint")
    assert err.value.status == 404
    assert "GET /slurm/v0.0.42/no/such/endpoint: HTTP 404: Unable to find requested URL" in str(err.value)


def test_answer_that_is_not_json(fake):
    client = make(fake)
    client.version  # noqa: B018
    fake.inject = [(200, "<html>proxy says hi</html>"), (500, "Internal error, no JSON")]
    with pytest.raises(sr.SlurmrestdError, match="not a JSON object"):
        client.nodes()
    with pytest.raises(sr.SlurmError, match="HTTP 500: Internal error, no JSON"):
        client.nodes()


def test_not_found_on_404_from_newer_slurm(fake):
    client = make(fake)
    client.version  # noqa: B018
    fake.inject = [(404, {"errors": [slurm_error("Unable to query JobId=7", "Invalid job id specified", 2017, "x")]})]
    assert client.job(7) is None


def test_describe_errors():
    assert sr.describe_errors([]) == ""
    assert sr.describe_errors([{"error": "E", "description": "E", "error_number": 0}]) == "E"
    assert sr.describe_errors(["plain"]) == "plain"
    assert sr.describe_errors([{}]) == "unknown error"
    two = sr.describe_errors([slurm_error("a", "b", 1, "s"), {"description": "c"}])
    assert two == "a: b (error 1, from s); c"


def test_error_to_dict():
    err = sr.SlurmError("boom", 500, [{"error": "x"}])
    assert err.to_dict() == {"status": 500, "errors": [{"error": "x"}]}
    assert str(err) == "boom"


# --------------------------------------------------------------------------
# Nodes


def test_nodes_and_node(fake):
    client = make(fake)
    assert [n["name"] for n in client.nodes()] == ["c1", "c2"]
    assert client.node("c1")["gres"] == "gpu:2"
    assert client.node("nope") is None
    assert fake.requests[-1].path == "/slurm/v0.0.42/node/nope"


def test_unknown_node_without_error_number_is_none(fake):
    client = make(fake)
    client.version  # noqa: B018
    fake.inject = [(500, {"errors": [slurm_error("Failure to query node c9", "Unspecified error", 0, "_dump_nodes")]})]
    assert client.node("c9") is None
    assert [r.path for r in fake.requests[-2:]] == ["/slurm/v0.0.42/node/c9", "/slurm/v0.0.42/nodes"]
    # Slurm 26.05 (v0.0.45) answers an unknown node with HTTP 200 and "No error"
    fake.inject = [(200, {"nodes": [], "errors": [slurm_error("Failure to query node c9", "No error", 0, "_dump_nodes")]})]
    assert client.node("c9") is None
    assert [r.path for r in fake.requests[-2:]] == ["/slurm/v0.0.42/node/c9", "/slurm/v0.0.42/nodes"]
    # ... but a failure for a node that exists is an error
    fake.inject = [(500, {"errors": [slurm_error("Failure to query node c1", "Unspecified error", 0, "_dump_nodes")]})]
    with pytest.raises(sr.SlurmError, match="Failure to query node c1"):
        client.node("c1")
    # ... and so is slurmctld being away
    fake.slurm.controller_up = False
    with pytest.raises(sr.SlurmError, match="Unable to contact slurm controller"):
        client.node("c1")


def test_update_node_sends_the_full_body(fake):
    client = make(fake)
    client.update_node("c2", state="drain", reason="disk", weight=5, features="gpu, nvme",
                       resume_after=None, comment="swap disk")
    call = fake.calls("POST")[-1]
    assert call.path == "/slurm/v0.0.42/node/c2"
    assert call.body == {
        "state": ["DRAIN"],
        "reason": "disk",
        "weight": {"set": True, "infinite": False, "number": 5},
        "features": ["gpu", "nvme"],
        "comment": "swap disk",
    }
    assert call.headers["content-type"] == "application/json"
    assert fake.slurm.nodes["c2"].states == ["IDLE", "DRAIN"]
    assert fake.slurm.nodes["c2"].weight == 5 and fake.slurm.nodes["c2"].comment == "swap disk"


def test_update_node_name_field_is_a_list(fake):
    make(fake).update_node("c1", name="c1", address="10.0.0.5", hostname=["c1"], comment="x")  # pylint: disable=kwarg-superseded-by-positional-arg
    assert fake.calls("POST")[-1].body == {"name": ["c1"], "address": ["10.0.0.5"], "hostname": ["c1"], "comment": "x"}


def test_update_node_rejects_unknown_fields_before_sending(fake):
    client = make(fake)
    with pytest.raises(ValueError, match="unknown node update field.*colour"):
        client.update_node("c1", colour="red")
    with pytest.raises(ValueError, match="at least one field"):
        client.update_node("c1", reason=None)
    assert fake.calls("POST") == []


def test_drain_and_resume(fake):
    client = make(fake)
    client.drain_node("c1", "maintenance")
    assert fake.calls("POST")[-1].body == {"state": ["DRAIN"], "reason": "maintenance"}
    assert sr.node_states(client.node("c1")) == ["IDLE", "DRAIN"]
    client.resume_node("c1")
    assert fake.calls("POST")[-1].body == {"state": ["RESUME"]}
    assert sr.node_states(client.node("c1")) == ["IDLE"]
    # Slurm refuses RESUME for a node that is neither drained nor down
    with pytest.raises(sr.SlurmError, match="Invalid node state specified"):
        client.resume_node("c1")
    with pytest.raises(ValueError, match="reason"):
        client.drain_node("c1", "  ")


def test_set_node_gres_replaces_the_whole_string(fake):
    client = make(fake)
    client.set_node_gres("c1", "shard:8")
    assert fake.calls("POST")[-1].body == {"gres": "shard:8"}
    assert fake.slurm.nodes["c1"].gres == "shard:8"
    client.set_node_gres("c1", ["gpu:2", "shard:8"])
    assert fake.calls("POST")[-1].body == {"gres": "gpu:2,shard:8"}


def test_update_nodes_sends_one_update_for_several_nodes(fake):
    client = make(fake)
    assert client.updates_nodes_together
    client.set_nodes_gres(["c1", "c2"], "shard:8")
    call = fake.calls("POST")[-1]
    assert call.path == "/slurm/v0.0.42/nodes" and call.body == {"gres": "shard:8", "name": ["c1", "c2"]}
    assert [fake.slurm.nodes[n].gres for n in ("c1", "c2")] == ["shard:8", "shard:8"]
    client.update_nodes("c1,c2", state="drain", reason="rack power")
    assert fake.calls("POST")[-1].body == {"state": ["DRAIN"], "reason": "rack power", "name": ["c1", "c2"]}
    assert sr.node_states(client.node("c2")) == ["IDLE", "DRAIN"]
    with pytest.raises(sr.SlurmrestdError, match="Invalid node name specified"):  # slurmctld: one unknown name fails it all
        client.set_nodes_gres(["c1", "nope"], "shard:2")
    assert fake.slurm.nodes["c1"].gres == "shard:8"
    with pytest.raises(ValueError, match="at least one node"):
        client.update_nodes([], gres="x")


def test_update_nodes_needs_v0_0_42_and_sends_nothing_before(fake):
    old = fake_slurmrestd(versions=("v0.0.40", "v0.0.41"))
    client = make(old)
    assert not client.updates_nodes_together
    with pytest.raises(sr.UnsupportedVersion, match="POST /nodes"):
        client.set_nodes_gres(["c1", "c2"], "shard:8")
    assert old.calls("POST") == []


def test_node_updates_need_an_admin(fake):
    client = make(fake, token=token("alice"), user="alice")
    with pytest.raises(sr.SlurmError) as err:
        client.drain_node("c1", "x")
    assert "Access/permission denied" in str(err.value)
    assert err.value.errors[0]["error_number"] == 2002


def test_updating_an_unknown_node_is_not_found(fake):
    with pytest.raises(sr.NotFound, match="Invalid node name specified"):
        make(fake).drain_node("c9", "x")


def test_node_names_are_quoted(fake):
    make(fake).node("a/b c")
    assert fake.requests[-1].path == "/slurm/v0.0.42/node/a%2Fb%20c"


# --------------------------------------------------------------------------
# Jobs


def test_submit_job_and_read_it_back(fake):
    client = make(fake)
    job_id = client.submit_job(
        "#!/bin/bash\nhostname\n",
        name="hello",
        partition="debug",
        current_working_directory="/tmp",
        environment={"PATH": "/bin:/usr/bin", "LANG": "C"},
        nodes="1",
        tasks=1,
        time_limit=5,
    )
    assert job_id == 100
    call = fake.calls("POST")[-1]
    assert call.path == "/slurm/v0.0.42/job/submit"
    assert call.body == {
        "script": "#!/bin/bash\nhostname\n",
        "job": {
            "name": "hello",
            "partition": "debug",
            "current_working_directory": "/tmp",
            "environment": ["PATH=/bin:/usr/bin", "LANG=C"],
            "nodes": "1",
            "tasks": 1,
            "time_limit": {"set": True, "infinite": False, "number": 5},
        },
    }
    job = client.job(job_id)
    assert job["name"] == "hello" and sr.job_states(job) == ["PENDING"]
    assert not sr.job_finished(job)
    assert [j["job_id"] for j in client.jobs()] == [100]


def test_submit_job_gives_a_default_environment(fake):
    make(fake).submit_job("#!/bin/sh\ntrue\n")
    env = fake.calls("POST")[-1].body["job"]["environment"]
    assert env == list(sr.DEFAULT_JOB_ENVIRONMENT)


def test_submit_job_reads_the_older_result_shape(fake):
    fake.submit_answers_result_only = True
    assert make(fake).submit_job("#!/bin/sh\ntrue\n") == 100


def test_submit_job_validates_the_script(fake):
    client = make(fake)
    with pytest.raises(ValueError, match="needs a script"):
        client.submit_job("")
    with pytest.raises(ValueError, match="#!"):
        client.submit_job("hostname\n")
    with pytest.raises(ValueError, match="first argument"):
        client.submit_job("#!/bin/sh\n", script="#!/bin/sh\n")  # pylint: disable=kwarg-superseded-by-positional-arg
    assert fake.calls("POST") == []


def test_submit_job_without_job_id_in_answer(fake):
    client = make(fake)
    client.version  # noqa: B018
    fake.inject = [(200, {"step_id": "batch"})]
    with pytest.raises(sr.SlurmError, match="no job_id"):
        client.submit_job("#!/bin/sh\ntrue\n")


def test_cancel_job_and_a_job_slurm_forgot(fake):
    client = make(fake)
    job_id = client.submit_job("#!/bin/sh\nsleep 60\n")
    assert client.cancel_job(job_id) is True
    assert fake.calls("DELETE")[-1].path == "/slurm/v0.0.42/job/%d" % job_id
    assert sr.job_states(client.job(job_id)) == ["CANCELLED"]
    assert client.cancel_job(4242) is False


def test_a_federated_job_that_job_id_rejects_is_read_and_cancelled_through_jobs(fake):
    client = make(fake)
    job_id = client.submit_job("#!/bin/sh\nsleep 60\n")
    federated = 134217728 + job_id  # cluster id 2 in the upper bits
    fake.slurm.jobs[federated] = dataclasses.replace(fake.slurm.jobs.pop(job_id), job_id=federated)
    fake.rejects_federated_ids = True
    assert sr.job_states(client.job(federated)) == ["PENDING"]
    assert client.cancel_job(federated) is True
    assert fake.calls("DELETE")[-1].path == "/slurm/v0.0.42/jobs/"
    assert sr.job_states(client.job(federated)) == ["CANCELLED"]
    # Gone from the listing too: unknown, and nothing more is sent.
    del fake.slurm.jobs[federated]
    deletes = len(fake.calls("DELETE"))
    assert client.job(federated) is None
    assert client.cancel_job(federated) is False
    assert len(fake.calls("DELETE")) == deletes + 1
    # A local id that /job/{id} does not know is not looked for in the listing.
    gets = len(fake.calls("GET"))
    assert client.job(4242) is None
    assert len(fake.calls("GET")) == gets + 1


def test_unknown_job_is_none(fake):
    assert make(fake).job(4242) is None


def test_job_state_helpers():
    assert sr.job_states({"job_state": "RUNNING"}) == ["RUNNING"]
    assert sr.job_states({}) == []
    assert sr.job_finished({"job_state": ["COMPLETED"]})
    assert sr.job_finished({"job_state": ["FAILED", "REQUEUED"]}) is True
    assert not sr.job_finished({"job_state": ["RUNNING", "COMPLETING"]})
    assert sr.node_states({"state": "IDLE"}) == ["IDLE"]
    assert sr.node_states(None) == []


def test_no_val_helpers():
    assert sr.no_val(5) == {"set": True, "infinite": False, "number": 5}
    assert sr.no_val(None) == {"set": False, "infinite": False, "number": 0}
    assert sr.no_val("UNLIMITED") == {"set": True, "infinite": True, "number": 0}
    assert sr.no_val({"set": True, "number": 1}) == {"set": True, "number": 1}
    with pytest.raises(ValueError):
        sr.no_val(True)
    assert sr.from_no_val({"set": True, "infinite": False, "number": 7}) == 7
    assert sr.from_no_val({"set": False, "infinite": False, "number": 0}) is None
    assert sr.from_no_val({"set": True, "infinite": True, "number": 0}) == float("inf")
    assert sr.from_no_val(3) == 3
    assert sr.as_list("a, b,,c") == ["a", "b", "c"]
    assert sr.as_list(None) == []
    assert sr.as_list(("x", 1)) == ["x", "1"]


# --------------------------------------------------------------------------
# Construction, Ansible glue, httpx absence


def test_unix_socket_transport():
    client = sr.SlurmrestdClient(user="root", token=token(), unix_socket="/run/slurmrestd/slurmrestd.socket")
    try:
        assert isinstance(client._http._transport, httpx.HTTPTransport)
        assert client._http._transport._pool._uds == "/run/slurmrestd/slurmrestd.socket"
        assert str(client._http.base_url) == "http://localhost:6820"
    finally:
        client.close()


def test_unix_socket_unreachable_message(tmp_path, sleeps):
    missing = str(tmp_path / "no.socket")
    with sr.SlurmrestdClient(user="root", token=token(), unix_socket=missing, retries=1, sleep=sleeps) as client:
        with pytest.raises(sr.SlurmrestdUnavailable, match="unix socket " + missing):
            client.ping()
    assert sleeps == [0.5]


def test_argument_spec_matches_the_doc_fragment():
    options = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    spec = sr.slurmrestd_argument_spec()
    assert set(options) == set(spec)
    for name, doc in options.items():
        assert doc["type"] == spec[name]["type"], name
        assert doc.get("default") == spec[name].get("default"), name
        assert bool(doc.get("no_log")) is False, "no_log is an argument_spec key, not a doc key"
    assert spec["slurmrestd_token"]["no_log"] is True


def test_client_from_params(fake):
    params = {
        "slurmrestd_url": "http://ctl1:6820/",
        "slurmrestd_unix_socket": None,
        "slurmrestd_user": None,
        "slurmrestd_token": token("slurm"),
        "slurmrestd_timeout": 3.0,
        "slurmrestd_validate_certs": True,
    }
    client = sr.client_from_params(params, transport=fake.transport())
    assert client.url == "http://ctl1:6820"
    client.nodes()
    assert fake.requests[-1].headers["x-slurm-user-name"] == "slurm"


def test_client_fails_clearly_without_httpx(monkeypatch):
    monkeypatch.setattr(sr, "HAS_HTTPX", False)
    with pytest.raises(sr.HttpxMissing) as err:
        sr.SlurmrestdClient(URL, "root")
    assert "install python3-httpx (Debian/Ubuntu) or pip install httpx" in str(err.value)

    class Module:
        params = {}

        def fail_json(self, **kwargs):
            raise RuntimeError(kwargs["msg"])

    with pytest.raises(RuntimeError, match="pip install httpx"):
        sr.client_from_module(Module())


def test_module_imports_without_httpx():
    code = (
        "import sys; sys.modules['httpx'] = None\n"
        "from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurmrestd as sr\n"
        "assert not sr.HAS_HTTPX and isinstance(sr.HTTPX_IMPORT_ERROR, ImportError)\n"
        "try:\n"
        "    sr.SlurmrestdClient('http://x:6820', 'root')\n"
        "except sr.HttpxMissing as err:\n"
        "    print(err)\n"
    )
    collections = pathlib.Path(__file__).resolve().parents[4] / ".collections"
    env = dict(os.environ, PYTHONPATH=str(collections))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "install python3-httpx (Debian/Ubuntu) or pip install httpx" in proc.stdout


# --------------------------------------------------------------------------
# Reading every node through each()


def node_entry(name):
    """A node as slurmrestd 24.11 describes it: dozens of fields, numbers as structs (abridged)."""
    entry = {"name": name, "hostname": name, "address": name, "state": ["IDLE"], "reason": "", "gres": "k8scpu:64",
             "gres_used": "k8scpu:0", "cpus": 64, "real_memory": 256000, "alloc_cpus": 0, "alloc_memory": 0,
             "features": ["x86_64", "avx2"], "partitions": ["batch", "k8s"], "boards": 1, "sockets": 2, "cores": 16,
             "threads": 2, "os": "Linux 6.1.0-13-amd64 #1 SMP PREEMPT_DYNAMIC Debian", "version": "24.11.5"}
    for key in ("cpu_load", "free_mem", "boot_time", "last_busy", "slurmd_start_time", "resume_after", "weight"):
        entry[key] = {"set": True, "infinite": False, "number": 1700000000}
    return entry


def nodes_answer(entries):
    body = {"nodes": entries, "last_update": {"set": True, "infinite": False, "number": NOW},
            "meta": {"slurm": {"version": {"major": "24", "minor": "11", "micro": "5"}}}, "errors": [], "warnings": []}
    return httpx.MockTransport(lambda request: httpx.Response(200, json={"pings": []} if request.url.path.endswith("/ping") else body))


def test_nodes_through_each_returns_what_each_made_of_every_node():
    entries = [node_entry("c1"), {"name": "c2", "state": ["DOWN"]}, node_entry("c3")]  # c2: no real_memory
    client = sr.SlurmrestdClient(URL, token=token(), user="root", transport=nodes_answer(entries))
    seen = []

    def each(entry):
        seen.append(entry["name"])
        return (entry["name"], entry["cpu_load"]["number"] if "cpu_load" in entry else None)

    assert client.nodes(each) == [("c1", 1700000000), ("c2", None), ("c3", 1700000000)]
    assert sorted(seen) == ["c1", "c2", "c3"]  # once each: c2 after the decoding, the others during it
    assert client.nodes() == entries


def test_nodes_through_each_never_holds_every_node_decoded():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "tests"))
    from memory_peak import peak_allocations

    entries = [node_entry("c%05d" % i) for i in range(3000)]
    client = sr.SlurmrestdClient(URL, token=token(), user="root", transport=nodes_answer(entries))
    client.nodes()  # the version probe, and a warm-up
    whole, _nodes = peak_allocations(client.nodes)
    del _nodes
    through_each, names = peak_allocations(lambda: client.nodes(lambda entry: entry["name"]))
    assert len(names) == 3000
    # The answer's text is held either way; the decoded nodes only without each().
    assert through_each < whole / 2, (through_each, whole)
