"""Random interleavings of everything that happens around the copilot, against the fakes.

Each example builds a world (one or two shared nodes, either strategy: count-
only GRES with configured counts in the config or learnt from Slurm, or
placeholder jobs on stock nodes) and runs 8 to 40 operations: admissions,
scheduler decisions, pod deletions, Slurm jobs starting and ending,
reconfigures, slurmd registrations (which slurmctld refuses when a count
changed while jobs hold the GRES) and the node helper that registers again,
copilot restarts, faults (409, 5xx, Slurm down, lost watch events, expired
watches), operations landing in the middle of a pass, and passes
(event-driven or full resyncs). After every operation:

* Slurm's GRES is never above the configured count (and only the copilot's
  drains are ever resumed, other GRES are kept);
* Slurm jobs + running pods never exceed a node's capacity, and neither do
  Slurm jobs + granted admissions (except jobs Slurm started while its GRES
  was reverted by a reconfigure, before the copilot re-asserted it);
* admissions only move forward (Reserved -> Granted/Denied -> Released/gone).

After every fault-free full resync (and the node helper's re-registration): no
node is left INVALID_REG or drained by a refused registration; Slurm's counts
equal the ledger's wanted counts (gres), or every Granted admission has exactly
one running placeholder job of its size and no other placeholder job is active
(placeholder); the ledger's Slurm allocation equals Slurm's own; nothing is
left Reserved, and nothing is held for a deleted pod.

HYBRIDHPC_PROPERTY_EXAMPLES sets the number of interleavings (default 10000).
"""

from __future__ import annotations

import os
import time

from copilot_world import World
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hybridhpc_copilot.units import MIB

EXAMPLES = int(os.environ.get("HYBRIDHPC_PROPERTY_EXAMPLES", "10000"))

# Operations are drawn as bytes (three per operation) and decoded here: one
# draw per example instead of a tree of one_of/tuples per operation keeps
# Hypothesis' own cost low, and shrinking still works (fewer bytes: fewer
# operations; smaller bytes: simpler operations).
CPU_MILLIS = (100, 500, 1000, 1500, 2000, 2735)
MEMORY = (1, MIB, 512 * MIB, 1024 * MIB, 3417 * MIB)
WORLD_OPS = (  # (weight, decoder of the remaining bits)
    (6, lambda n: ("admit", n % 2, CPU_MILLIS[n // 2 % 6], MEMORY[n // 12 % 5])),
    (4, lambda n: ("schedule",)),
    (4, lambda n: ("job_start", n % 2, 1 + n // 2 % 3, (100, 1000, 3000)[n // 6 % 3])),
    (3, lambda n: ("job_end", n % 8)),
    (2, lambda n: ("delete_pod", n % 8)),
    (1, lambda n: ("cleanup",)),
    (2, lambda n: ("reconfigure",)),
    (2, lambda n: ("register", n % 2)),
    (1, lambda n: ("node_agent",)),
    (1, lambda n: ("cordon", n % 2, bool(n // 2 % 2))),
    (1, lambda n: ("admin_drain", n % 2, bool(n // 2 % 2))),
)
OTHER_OPS = (
    (24, lambda n: ("pass", bool(n % 2), bool(n // 2 % 2))),
    (2, lambda n: ("restart",)),
    (2, lambda n: ("faults", ("none", "kube", "slurm", "slurm-down", "all")[n % 5], (0.1, 0.3, 0.6)[n // 5 % 3],
                   (0.0, 0.3, 1.0)[n // 15 % 3])),
    (1, lambda n: ("tick", (1, 30, 61, 300)[n % 4])),
    (1, lambda n: ("compact",)),
    (4, lambda n: ("concurrent", decode(n, WORLD_OPS))),
    (1, lambda n: ("settle",)),
)
ALL_OPS = WORLD_OPS + OTHER_OPS


def decode(n: int, table=ALL_OPS):
    total = sum(weight for weight, _ in table)
    slot, rest = n % total, n // total
    for weight, make in table:
        if slot < weight:
            return make(rest)
        slot -= weight
    raise AssertionError("unreachable")


def decode_all(data: bytes) -> list:
    return [decode(int.from_bytes(data[i:i + 3], "little")) for i in range(0, len(data) - 2, 3)]


scenarios = st.fixed_dictionaries({
    "capacities": st.lists(st.tuples(st.integers(1, 6), st.sampled_from([1000, 4000, 8000])), min_size=1, max_size=2),
    "configured_in_config": st.booleans(),
    "strategy": st.sampled_from(["gres", "placeholder"]),
    "seed": st.integers(0, 2**32 - 1),
    "ops": st.binary(min_size=24, max_size=120).map(decode_all),
})



# Interleavings the test found once (a restarted copilot whose first watch lost a GenericNode's
# ADDED event gave Slurm the node's whole GRES back): run on every run, whatever is drawn.
FOUND_1 = (b"\x04L\x0b4JJP`lv\x89\x8e\x94\x97\x97\xb2\xc1\xc2\xd5\xe4\xf2\xb8\xb1\xbc\x04c\xcf\r2\x00G\x04\x0f\x14@LNSj|"
           b"\x8f\x90\x9f\xaa\xb5\xcb\xcd\xe6\xf3\xf6Y\r6N\xa2\r+,^_\x83\x89\xb0\x0e#\xc0%b\xa2\xb6\xe2\xe7Uz\xd3\xeaS\xd1 "
           b"\xf5BD\xa2\xebH\x81\xa1\x9c\xbd\xd4\x10\x01#?W\x01\x92\xeb\xa0\x80\x8e\x9b\x12'\xa8\x00\x96\x15\x1d\xbf\xf9\x95J\x83")
FOUND_2 = (b"\x04\x04\x00\x00\x00\x00\x01\x00\x00s\x88\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\xb7\xb1\xbc\x00\x00"
           b"\x00\x00\x00\x00\x06\x02\x00\x0f@%\x01\x00\t\x00\x00\x03\x00\x00\x03\x01\x00\x03\x00\x00\n\x00\x00L\x00\x00"
           b"\x00\x02\x00\x00\x00\x00\x00\x07\x00\x00#b\xa2\x00\x00\x01Uz\xd3\xe7\x00\x00\x10\x00\x00;\xa2\xebH\x81\x9f\r"
           b"\x00&\x0c\x01\x01?W%\x91\xeb\xa0\x80\x01\x9b\x12'\xa8\x00\x96\x15\x1d\xbf\xf9\x95J\x83")


def found_in_ci(data: bytes) -> dict:
    return {"capacities": [(4, 8000), (4, 8000)], "configured_in_config": True, "strategy": "gres", "seed": 0,
            "ops": decode_all(data)}


def run_scenario(scenario, **world) -> World:
    """One interleaving, the invariants checked after each operation; ``world``: World's other fields (its API server)."""
    world = World(scenario["capacities"], scenario["configured_in_config"], scenario["seed"], scenario["strategy"], **world)
    for op in scenario["ops"]:
        if op[0] == "settle":
            world.settle()
        else:
            world.apply(op)
        world.check()
    world.settle()
    return world


def interleavings(examples: int):
    """Hypothesis' decorator for a check of one scenario: ``examples`` drawn, and the ones CI found, always."""

    def decorate(check):
        found = example(found_in_ci(FOUND_2))(example(found_in_ci(FOUND_1))(check))
        return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])(given(scenarios)(found))

    return decorate


def test_random_interleavings_keep_the_invariants():
    runs = []

    @interleavings(EXAMPLES)
    def check(scenario):
        run_scenario(scenario)
        runs.append(len(scenario["ops"]))

    started = time.monotonic()
    check()
    elapsed = time.monotonic() - started
    print("\n%d interleavings (%d operations) in %.1fs" % (len(runs), sum(runs), elapsed))
    assert len(runs) >= EXAMPLES
