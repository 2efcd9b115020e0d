"""The copilot's property test (roles/copilot/files/copilot/tests/test_copilot_property.py) on a real kube-apiserver.

The same random interleavings and invariants, with the API server a real one
(real_world.py): its resourceVersions and conflicts, the GenericNode CRD's
schema and status subresource, and its 410 Gone when a watch starts from a
revision etcd has compacted (the plane's API server watches etcd directly, so
the world's ``compact`` operation expires the copilot's next watch as it
would at a site). Slurm is the fakes' (FakeSlurm behind the fake slurmrestd),
as in the property test on the double.

What the real server cannot do on demand stays with the double's run (10,000
interleavings in make property, 2,500 in make test): a 5xx, or a 409 to a
write nobody raced. Here 409s come from the server itself, when an operation
lands between the copilot's read and its write.

HYBRIDHPC_REAL_PROPERTY_EXAMPLES sets the number of interleavings (default
DEFAULT_EXAMPLES): each is about a hundred requests to the real server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from .conftest import COPILOT, ROOT, admin_kubeconfig, apply_crd, official_client, running_plane

DEFAULT_EXAMPLES = 200
EXAMPLES = int(os.environ.get("HYBRIDHPC_REAL_PROPERTY_EXAMPLES", str(DEFAULT_EXAMPLES)))

subprocess.run(["sh", str(COPILOT / "tools" / "vendor.sh")], check=True, stdout=subprocess.DEVNULL,
               env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
for _path in (ROOT / "tests", COPILOT / "tests"):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

from copilot_world import World  # noqa: E402
from hybridhpc_copilot import names  # noqa: E402
from hybridhpc_copilot.units import MIB  # noqa: E402
from test_copilot_property import interleavings, run_scenario  # noqa: E402

from .real_world import RealApiServer  # noqa: E402


@pytest.fixture(scope="module")
def real_api_server():
    """A plane of its own: etcd and kube-apiserver without its watch cache (so that a compaction expires
    watches), the GenericNode CRD applied; nothing else places or runs pods."""
    with running_plane(watch_cache=False, components=("etcd", "kube-apiserver")) as plane:
        kubeconfig = admin_kubeconfig(plane)
        with official_client(kubeconfig) as client:
            apply_crd(client)
        yield RealApiServer(str(kubeconfig), plane.etcd_revision, plane.compact_etcd)


def own_names() -> dict:
    """World's fields that keep a world's objects apart from the other worlds' on the shared server."""
    world_id = uuid.uuid4().hex[:8]
    return {"cluster": "w-" + world_id, "prefix": "w%s-" % world_id}


def test_random_interleavings_keep_the_invariants_on_a_real_api_server(real_api_server, report_line):
    runs, stats = [], {}

    @interleavings(EXAMPLES)
    def check(scenario):
        try:
            world = run_scenario(scenario, api=real_api_server, **own_names())
        finally:
            real_api_server.clean_up()
        runs.append(len(scenario["ops"]))
        for key, value in world.stats.items():
            stats[key] = stats.get(key, 0) + value

    started = time.monotonic()
    check()
    elapsed = time.monotonic() - started
    report_line("\n%d interleavings (%d operations) on the real API server in %.1fs; 410 Gone %d; %s" % (
        len(runs), sum(runs), elapsed, real_api_server.writes.gone, ", ".join("%s %d" % kv for kv in sorted(stats.items()))))
    assert len(runs) >= EXAMPLES


# The random runs meet the real server's 409s and 410s by chance (a few of each in 200); the two tests below
# meet each on purpose.
@pytest.fixture
def world(real_api_server):
    yield World([(4, 8000)], api=real_api_server, **own_names())
    real_api_server.clean_up()


def admission_state(world, pod):
    return (world._entry(world.pods[pod]) or {}).get("state")


def test_a_write_between_the_copilots_read_and_its_write_gets_the_servers_409(world, real_api_server):
    """The scheduler adds an admission while the copilot's ledger write is on its way: the real server refuses
    the write (the GenericNode moved on), the copilot reads again and decides both."""
    world.apply(("admit", 0, 1000, MIB))
    first, raced = next(iter(world.pods)), []

    def scheduler_races_the_ledger_write(method, path):
        if method == "PUT" and path.endswith("/status") and not raced:
            raced.append(path)
            world.apply(("admit", 0, 500, 64 * MIB))

    real_api_server.intercept(None, "", scheduler_races_the_ledger_write, count=None)
    world.run_pass(full=False, drop=False)
    assert raced, "the copilot wrote no ledger"
    assert world.stats.get("conflicts", 0) >= 1, world.stats
    world.settle()
    second = [pod for pod in world.pods if pod != first][0]
    assert (admission_state(world, first), admission_state(world, second)) == (names.GRANTED, names.GRANTED)


def test_a_watch_from_before_a_compaction_gets_the_servers_410_and_the_copilot_lists_again(world, real_api_server):
    """etcd compacted past the copilot's informers: their next watch gets 410 Gone from the real server, and
    the copilot lists again and decides what was written meanwhile, in that same pass."""
    world.apply(("admit", 0, 1000, MIB))
    world.run_pass(full=False, drop=False)
    world.apply(("admit", 0, 500, 64 * MIB))  # written after the informers' last event, then compacted away
    real_api_server.compact()
    gone = real_api_server.writes.gone
    world.run_pass(full=False, drop=False)
    assert real_api_server.writes.gone > gone, "no watch got 410 Gone from the real server"
    assert [admission_state(world, pod) for pod in world.pods] == [names.GRANTED, names.GRANTED]
    world.check()
