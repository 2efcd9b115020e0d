"""A small world for the property test: Slurm, the API server, a scheduler, and the copilot.

The copilot runs its real loop code (informers, executor, passes) and its real
clients: ``KubeClient`` to a Kubernetes API server and ``RestSlurm`` to the
fake slurmrestd (an httpx transport; ``tests/fakes/slurmrestd.py`` at the
collection's root) over ``FakeSlurm``. The API server is the double in memory
(``KubeDouble(listen=False)``) unless ``api`` gives another with the same
in-process calls: tests/k8s_control_plane/real_world.py runs the world on a
real kube-apiserver, where the faults it cannot produce on demand (5xx, a 409
out of nowhere) are not injected and 409s come from the server itself.
Everything else that happens in a cluster is an operation on the world: a scheduler asking for admissions, binding pods once granted and
deleting them, Slurm jobs starting and ending against the count-only GRES,
reconfigures reverting the GRES, copilot restarts (all in-memory state
dropped), API faults (409s, 5xx, Slurm unavailable, lost watch events, expired
watches) and operations that land in the middle of a copilot pass
(``concurrent``: they run just before one of the copilot's calls).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from copilot_builders import rest_slurm_of
from copilot_process import KubeDouble
from fakes.slurm_state import FakeNode, FakeSlurm, SlurmctldDown

from hybridhpc_copilot import core, names, placeholder
from hybridhpc_copilot.backoff import Backoff
from hybridhpc_copilot.kube import NODES, PODS, TemporaryError
from hybridhpc_copilot.passes import Copilot
from hybridhpc_copilot.units import MIB, cpus_for, mib_for, parse_gres

CLUSTER = "onprem"


class InvariantBroken(AssertionError):
    pass


@dataclass
class PodRecord:
    name: str
    node: str  # GenericNode name
    cpu: int  # millicores
    mem: int  # bytes
    uid: str
    bound: bool = False
    alive: bool = True


@dataclass
class World:
    capacities: list  # [(cpus, memory_mb)] per node
    configured_in_config: bool = True
    seed: int = 0
    strategy: str = "gres"
    now: float = 1_800_000_000.0
    retry_clock: float = 0.0  # the copilot's clock for retrying failed Slurm actions (monotonic in the daemon)
    faults: str = "none"
    fault_rate: float = 0.0
    drop_rate: float = 0.0
    concurrent: list = field(default_factory=list)
    pods: dict = field(default_factory=dict)
    jobs: list = field(default_factory=list)  # (slurm node, job id)
    history: dict = field(default_factory=dict)  # admission uid -> states seen
    trace: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    api: Any = None  # the API server (KubeDouble's in-process calls); None: the double in memory
    cluster: str = CLUSTER
    prefix: str = ""  # of the Kubernetes objects' names, so that worlds can share a real API server

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        if self.api is None:
            self.api = KubeDouble(window=40, listen=False).start()
        self.injects = getattr(self.api, "injects_faults", True)
        self.api.intercept(None, "", self._kube_fault, count=None)  # before every request the copilot sends
        self.kube = self.api.client()
        self.slurm = FakeSlurm([FakeNode("c%d" % i, cpu, mem, other_gres="gpu:1" if i else "",
                                         gres_shared=self.strategy == "gres")
                                for i, (cpu, mem) in enumerate(self.capacities)], fault=self._slurm_fault)
        for i in range(len(self.capacities)):
            self.api.add_in_process({
                "apiVersion": names.API_VERSION, "kind": names.KIND,
                "metadata": {"name": self.generic_node(i), "labels": {names.LABEL_CLUSTER_NAME: self.cluster}},
                "spec": {"alias": "c%d" % i, "type": names.NODE_TYPE_SLURM, "admissions": []},
            })
            self.api.add_in_process({"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.generic_node(i)}, "spec": {}})
        self.serial = 0
        self.restart()

    def generic_node(self, index: int) -> str:
        """The name of node ``index``'s GenericNode (and of its Kubernetes Node)."""
        return "%sk8s-c%d" % (self.prefix, index % len(self.capacities))

    # -- the copilot ---------------------------------------------------------------------
    def settings(self) -> core.Settings:
        configured = {"c%d" % i: core.Capacity(c, m) for i, (c, m) in enumerate(self.capacities)}
        return core.Settings(configured=configured if self.configured_in_config else {}, reservation_timeout=60,
                             strategy=self.strategy)

    def restart(self):
        """A new copilot process: nothing survives but what Slurm and the API server hold."""
        # Slurm actions that failed wait out their backoff on a clock of their own: settle() moves it past any.
        # The copilot's own Slurm client, through the fake slurmrestd (no socket) to this world's Slurm.
        slurm = rest_slurm_of(self.slurm)
        self.copilot = Copilot(self.kube, slurm, self.settings(), self.cluster, clock=lambda: self.now,
                               backoff=Backoff(clock=lambda: self.retry_clock))

    def run_pass(self, full: bool, drop: bool):
        dropper = (lambda event, obj: self.rng.random() < self.drop_rate) if drop else None
        try:
            self.copilot.pump(dropper)
        except TemporaryError:
            pass  # the watch failed: the next pass (or resync) catches up
        result = self.copilot.sync(full=full)
        self._count("passes")
        self._count("conflicts", result.conflicts)
        self._count("pass_errors", len(result.errors))
        for action in result.actions:
            self._count(action.kind)

    def _count(self, key, amount=1):
        self.stats[key] = self.stats.get(key, 0) + amount

    # -- faults and interleaving ------------------------------------------------------------
    def _interleave(self):
        while self.concurrent and self.rng.random() < 0.5:
            self.apply(self.concurrent.pop(0))

    def _kube_fault(self, method, _path):
        """Before each request to the API server: what lands meanwhile, and the answer instead, if any."""
        self._interleave()
        if self.injects and self.faults in ("kube", "all") and self.rng.random() < self.fault_rate:
            if method == "PUT" and self.rng.random() < 0.5:  # a write of the ledger or the finalizer
                return 409
            return 503
        return None

    def _slurm_fault(self, operation, node):
        self._interleave()
        if self.faults == "slurm-down":
            raise SlurmctldDown("injected: slurmctld down")
        if self.faults in ("slurm", "all") and self.rng.random() < self.fault_rate:
            raise SlurmctldDown("injected: slurmrestd 503")

    # -- what the rest of the cluster does -----------------------------------------------------
    def apply(self, op):
        self.trace.append(op)
        kind, args = op[0], op[1:]
        getattr(self, "op_" + kind)(*args)

    def op_pass(self, full, drop):
        self.run_pass(full, drop)
        if self.rng.random() < 0.5:
            self.op_schedule()  # the scheduler often acts on the decisions at once

    def op_faults(self, mode, rate, drop_rate):
        self.faults, self.fault_rate, self.drop_rate = mode, rate, drop_rate

    def op_concurrent(self, op):
        self.concurrent.append(op)

    def op_restart(self):
        self.restart()

    def op_tick(self, seconds):
        self.now += seconds
        self.retry_clock += seconds

    def op_compact(self):
        self.api.compact()

    def _update_spec(self, node, change):
        self.api.update_in_process(node, lambda obj: change(obj["spec"].setdefault("admissions", [])))

    def op_admit(self, index, cpu, mem):
        node = self.generic_node(index)
        self.serial += 1
        name = "%sp%d" % (self.prefix, self.serial)
        # No scheduler places it: the world binds pods itself (op_schedule).
        pod = self.api.add_in_process({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                                       "spec": {"schedulerName": "hybridhpc-property-world",
                                                "containers": [{"name": "c", "image": "none"}]}})
        record = PodRecord(name, node, cpu, mem, pod["metadata"]["uid"])
        self.pods[name] = record
        uid = "adm-" + name
        self._update_spec(node, lambda adms: adms.append({
            "uid": uid, "pod": {"namespace": "default", "name": name},
            "request": {"cpu": "%dm" % cpu, "memory": str(mem)}}))

    def op_schedule(self):
        """The scheduler acts on decisions: bind granted pods, give up on denied ones."""
        for record in list(self.pods.values()):
            if not record.alive:
                continue
            entry = self._entry(record)
            if entry is None:
                continue
            if entry.get("state") == names.GRANTED and not record.bound:
                record.bound = True
                self._count("binds")
            elif entry.get("state") == names.DENIED:
                self._delete_pod(record)

    def op_delete_pod(self, index):
        alive = [r for r in self.pods.values() if r.alive]
        if alive:
            self._delete_pod(alive[index % len(alive)])

    def op_cleanup(self):
        """The scheduler drops admissions whose pods are gone."""
        gone = {"adm-" + r.name for r in self.pods.values() if not r.alive}

        def drop_gone(adms):
            adms[:] = [a for a in adms if a["uid"] not in gone]

        for i in range(len(self.capacities)):
            self._update_spec(self.generic_node(i), drop_gone)

    def op_job_start(self, index, cpus, mem):
        slurm_node = "c%d" % (index % len(self.capacities))
        job = self.slurm.start_job(slurm_node, cpus, mem)
        if job is not None:
            self.jobs.append((slurm_node, job))
            self._count("jobs")
            if self.slurm.nodes[slurm_node].jobs[job][2]:
                self._count("jobs_in_revert_window")

    def op_job_end(self, index):
        if self.jobs:
            slurm_node, job = self.jobs.pop(index % len(self.jobs))
            self.slurm.end_job(slurm_node, job)

    def op_reconfigure(self):
        self.slurm.reconfigure()

    def op_register(self, index):
        """slurmd restarts, or slurmctld asks for its periodic registration."""
        self.slurm.register("c%d" % (index % len(self.capacities)))

    def op_node_agent(self):
        """The node-side helper (slurmd role): register again once no job holds the node's k8s GRES."""
        for name, node in self.slurm.nodes.items():
            if "INVALID_REG" in node.states and re.search(names.REGISTRATION_REASON, node.reason) and node.used == (0, 0):
                self._count("agent_registrations")
                self.slurm.register(name)

    def op_cordon(self, index, unschedulable):
        name = self.generic_node(index)
        self.api.update_in_process(name, lambda obj: obj.setdefault("spec", {}).update(unschedulable=unschedulable),
                                      plural=NODES)

    def op_admin_drain(self, index, drain):
        slurm_node = "c%d" % (index % len(self.capacities))
        if drain:
            self.slurm.admin_drain(slurm_node, "admin: bad DIMM")
        else:
            self.slurm.admin_resume(slurm_node)

    def _settled_placeholders(self, index, status):
        """After a resync: one running placeholder job per granted admission, none for anything else."""
        gn = self.generic_node(index)
        ledger = status.get(names.STATUS_ADMISSIONS) or {}
        active = {}
        for job in self.slurm.jobs.values():
            owner = placeholder.parse_job_name(job.name)
            if job.active and owner and owner[0] == gn:
                if owner[1] in active:
                    raise InvariantBroken("two active placeholder jobs for %s" % owner[1])
                active[owner[1]] = job
        for uid, entry in ledger.items():
            job = active.pop(uid, None)
            if entry["state"] == names.RESERVED:
                raise InvariantBroken("after a resync %s is still Reserved" % uid)
            if entry["state"] == names.GRANTED:
                if job is None or job.state != "RUNNING":
                    raise InvariantBroken("after a resync granted %s has no running placeholder job (%s)" % (uid, job))
                if (job.cpus, job.memory_mb) != placeholder.job_size(entry):
                    raise InvariantBroken("placeholder job %s has the wrong size for %s" % (job, entry))
                if not self.pods[entry["pod"]["name"]].alive:
                    raise InvariantBroken("after a resync %s holds resources for a deleted pod" % uid)
            elif job is not None:
                raise InvariantBroken("after a resync %s (%s) still has placeholder job %s" % (uid, entry["state"], job))
        if active:
            raise InvariantBroken("after a resync placeholder jobs nothing holds: %s" % active)
        node = self.slurm.nodes["c%d" % index]
        slurm_alloc = status[names.STATUS_ALLOCATED][0]["allocated"]
        if core.entry_amounts({"request": slurm_alloc}) != (node.used[0] * 1000, node.used[1] * MIB):
            raise InvariantBroken("after a resync the ledger says Slurm holds %s, its own jobs hold %s" % (
                slurm_alloc, node.used))

    def _cordoned(self, index) -> bool:
        return bool(self.api.peek(self.generic_node(index), NODES)["spec"].get("unschedulable"))

    def _delete_pod(self, record):
        record.alive = False
        record.bound = False
        self.api.delete_in_process(record.name, PODS, "default")

    def _entry(self, record):
        obj = self.api.peek(record.node)
        return ((obj or {}).get("status") or {}).get(names.STATUS_ADMISSIONS, {}).get("adm-" + record.name)

    # -- what must always hold ------------------------------------------------------------------
    def check(self):
        if self.slurm.violations:
            raise InvariantBroken("Slurm rule broken: %s" % self.slurm.violations)
        for i, (cap_cpu, cap_mem) in enumerate(self.capacities):
            slurm_node, gn = "c%d" % i, self.generic_node(i)
            fake = self.slurm.nodes[slurm_node]
            if fake.count_cpu > cap_cpu or fake.count_mem > cap_mem:
                raise InvariantBroken("%s: GRES %s above configured" % (slurm_node, fake.gres))
            # Jobs Slurm started while its GRES was reverted by a reconfigure (before the copilot
            # re-asserted it) can sit in Kubernetes' share: that window is Slurm's, not the copilot's.
            cpu = sum(j[0] for j in fake.jobs.values() if not j[2])
            mem = sum(j[1] for j in fake.jobs.values() if not j[2])
            bound = [r for r in self.pods.values() if r.node == gn and r.bound]
            if cpu * 1000 + sum(r.cpu for r in bound) > cap_cpu * 1000 or mem * MIB + sum(r.mem for r in bound) > cap_mem * MIB:
                raise InvariantBroken("%s: Slurm %d CPUs %d MB + running pods %s exceed %d CPUs %d MB" % (
                    slurm_node, cpu, mem, [(r.name, r.cpu, r.mem) for r in bound], cap_cpu, cap_mem))
            ledger = ((self.api.peek(gn).get("status") or {}).get(names.STATUS_ADMISSIONS) or {})
            granted = [core.entry_amounts(e) for e in ledger.values() if e.get("state") == names.GRANTED]
            if self.strategy == placeholder.STRATEGY:  # every admission has its own job, in whole CPUs and MiB
                sizes = [placeholder.job_size(e) for e in ledger.values() if e.get("state") == names.GRANTED]
                granted_cpu, granted_mem = sum(s[0] for s in sizes), sum(s[1] for s in sizes)
            else:
                granted_cpu = cpus_for(sum(g[0] for g in granted))
                granted_mem = mib_for(sum(g[1] for g in granted))
            if cpu + granted_cpu > cap_cpu or mem + granted_mem > cap_mem:
                raise InvariantBroken("%s: Slurm %d CPUs %d MB + granted %s exceed %d/%d" % (
                    slurm_node, cpu, mem, granted, cap_cpu, cap_mem))
            for uid, entry in ledger.items():
                self._transition(gn + "|" + uid, entry.get("state"))
                reason = str(entry.get("reason") or "")
                if entry.get("state") in (names.DENIED, names.RELEASED) and ("not found" in reason or "deleted" in reason):
                    record = self.pods.get(entry["pod"]["name"])
                    if record is not None and record.alive:
                        raise InvariantBroken("%s: %s %s, but the pod exists" % (uid, entry["state"], reason))
            for key in [k for k in self.history if k.startswith(gn + "|") and k.split("|", 1)[1] not in ledger]:
                self._transition(key, None)

    _ALLOWED = {
        None: {names.RESERVED, names.DENIED},
        names.RESERVED: {names.GRANTED, names.DENIED, names.RELEASED, None},
        names.GRANTED: {names.RELEASED, None},
        names.DENIED: {None},
        names.RELEASED: {None},
    }

    def _transition(self, uid, state):
        last = self.history.get(uid)
        if last == state:
            return
        if state not in self._ALLOWED[last] and not (last is None and state in (names.GRANTED, names.RELEASED)):
            raise InvariantBroken("admission %s went %s -> %s" % (uid, last, state))
        if state is None:
            self.history.pop(uid, None)
        else:
            self.history[uid] = state

    def settle(self):
        """No faults, no lost events, one full resync: then the ledger must match Slurm exactly."""
        self.faults, self.drop_rate, self.concurrent = "none", 0.0, []
        self.retry_clock += 3600  # a resync long after the last failure
        self.run_pass(full=True, drop=False)
        for _ in range(2):  # a refused registration whose jobs are gone: the node agent registers, the copilot resumes
            if not any("INVALID_REG" in n.states for n in self.slurm.nodes.values()):
                break
            self.op_node_agent()
            self.run_pass(full=True, drop=False)
        self.check()
        # A pass ends when another round would find nothing to do: one more pass, with nothing
        # changed meanwhile, must find nothing (else the pass stopped early and what it left
        # waits for the next wake-up).
        again = self.copilot.sync(full=True)
        if again.actions:
            raise InvariantBroken("a resync right after a resync still acted: %s" % [(a.kind, a.node) for a in again.actions])
        slurm_nodes = rest_slurm_of(self.slurm).node_states()  # as the copilot reads them (no fault: none is on)
        for i, (cap_cpu, cap_mem) in enumerate(self.capacities):
            gn = self.api.peek(self.generic_node(i))
            status = gn.get("status") or {}
            node = slurm_nodes["c%d" % i]
            # A refused registration keeps the node drained while jobs hold the GRES (Slurm refuses it
            # again until they end); once they are gone it must be back in service.
            idle = self.slurm.nodes["c%d" % i].used == (0, 0)
            if idle and node.invalid_registration and node.registration_refused is not None:
                raise InvariantBroken("after a resync %s is still %s: %s" % (node.name, node.states, node.reason))
            if idle and node.drained and node.registration_refused is not None and not self._cordoned(i):
                raise InvariantBroken("after a resync %s is still drained for a refused registration" % node.name)
            if self.strategy == placeholder.STRATEGY:
                self._settled_placeholders(i, status)
                continue
            wanted = parse_gres(status[names.STATUS_SLURM]["wantedGres"])
            counts = node.counts
            if (wanted[names.GRES_CPU], wanted[names.GRES_MEMORY]) != counts:
                raise InvariantBroken("after a resync Slurm has %s, the ledger wants %s" % (node.gres, wanted))
            ledger = status.get(names.STATUS_ADMISSIONS) or {}
            want = core.wanted_counts(core.Capacity(cap_cpu, cap_mem), ledger)
            if want != counts:
                raise InvariantBroken("after a resync Slurm has %s, the ledger's holdings want %s" % (node.gres, want))
            used = node.usage("max")
            slurm_alloc = status[names.STATUS_ALLOCATED][0]["allocated"]
            if core.entry_amounts({"request": slurm_alloc}) != (used[0] * 1000, used[1] * MIB):
                raise InvariantBroken("after a resync the ledger says Slurm holds %s, Slurm says %s" % (slurm_alloc, used))
            for uid, entry in ledger.items():
                if entry["state"] == names.RESERVED:
                    raise InvariantBroken("after a resync %s is still Reserved" % uid)
                if entry["state"] == names.GRANTED and not self.pods[entry["pod"]["name"]].alive:
                    raise InvariantBroken("after a resync %s holds resources for a deleted pod" % uid)

