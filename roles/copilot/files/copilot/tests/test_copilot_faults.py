"""Faults around the copilot daemon as a process: the shipped entry point, over HTTP, killed and restarted for real.

The unit-level versions of these faults run in test_copilot_property.py
against in-memory fakes; here the copilot is ``python -m hybridhpc_copilot``
between the Kubernetes API server double and a fake slurmrestd process
(copilot_process.py), and the faults are real: a slurmrestd process killed
and started again, 5xx answers, a writer landing between the copilot's read
and its write (409), a watch that expired (410), tokens that expire, and the
copilot itself SIGKILLed at each step of an admission.

While each fault plays out, :class:`CapacityWatch` samples the ledger and Slurm
every few milliseconds and records every moment where

* Slurm's usage plus what Kubernetes holds (Reserved + Granted) exceeds the node;
* Slurm could still hand out what is Granted (its GRES count above the node
  minus the granted share): a lost grant;
* Slurm's GRES is lower than the node minus what the ledger holds: a grant
  applied twice, or Slurm lowered before the ledger said why;
* an admission moves backwards or vanishes from the ledger.
"""

from __future__ import annotations

import itertools
import threading
import time

import httpx
from copilot_process import CopilotHarness, wait_until

from hybridhpc_copilot import names
from hybridhpc_copilot.units import cpu_millis, cpus_for, memory_bytes, mib_for
from k8s_double import Fault

NODE, SLURM_NODE = "k8s-c1", "c1"
CAPACITY = (8, 16000)  # k8scpu, k8smemory (MB) in slurm.conf and in the copilot's config
STATUS_PUT = r"/genericnodes/%s/status$" % NODE
GRES_POST = r"/node/%s$" % SLURM_NODE
ORDER = {names.RESERVED: 0, names.GRANTED: 1, names.DENIED: 1, names.RELEASED: 2}


def held(ledger: dict, states=names.HOLDING_STATES) -> tuple[int, int]:
    """Whole CPUs and MB the ledger's entries in ``states`` take from Slurm (as the copilot rounds them)."""
    cpu = mem = 0
    for entry in ledger.values():
        if entry.get("state") in states:
            cpu += cpu_millis(entry["request"]["cpu"])
            mem += memory_bytes(entry["request"]["memory"])
    return cpus_for(cpu), mib_for(mem)


def expected_counts(*requests) -> tuple[int, int]:
    """Slurm's GRES counts once ``(cpu, memory)`` requests are granted: the node minus Kubernetes' share."""
    cpu = cpus_for(sum(cpu_millis(c) for c, _m in requests))
    mem = mib_for(sum(memory_bytes(m) for _c, m in requests))
    return CAPACITY[0] - cpu, CAPACITY[1] - mem


class CapacityWatch:
    """Samples the ledger, then Slurm, then the ledger again, in a thread, and records every broken rule.

    The double read makes each rule sound without locking anything: the copilot
    writes the ledger before it lowers the GRES and lowers the GRES before it
    grants, and no admission is released in these tests, so holdings only grow.
    ``strict=False`` drops the lost-grant rule, which a Slurm that reverted its
    GRES (slurmctld restart) breaks by design until the copilot re-asserts it.

    The samples cover the whole ``with`` block however quickly the copilot
    works: entering waits for a first sample (the state before), leaving takes
    one more that starts after the block ended (the state after), and in
    between the thread samples back to back, ``interval`` apart.
    :meth:`assert_clean` fails when that coverage is missing or a gap between
    two tries grew past ``max_gap`` seconds (a stalled watch would see nothing).
    """

    def __init__(self, harness: CopilotHarness, strict: bool = True, interval: float = 0.002, max_gap: float = 1.0):
        self.harness, self.strict, self.interval, self.max_gap = harness, strict, interval, max_gap
        self.problems: list[str] = []
        self.history: dict[str, list] = {}
        self.sampled_at: list[float] = []  # when each sample started (monotonic)
        self.tried_at: list[float] = []  # when each try started, those that found slurmrestd down included
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capacity-watch", daemon=True)

    @property
    def samples(self) -> int:
        return len(self.sampled_at)

    def __enter__(self) -> CapacityWatch:
        self._thread.start()
        self._first.wait(10)
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self._ended = time.monotonic()
        self._stop.set()
        self._thread.join(15)
        self.elapsed = self._ended - self._started

    def _run(self) -> None:
        with httpx.Client(timeout=2) as client:
            last_chance = None
            while True:
                stopping = self._stop.is_set()  # read before the sample: once set, this sample starts after the block
                try:
                    if self._sample(client):
                        self._first.set()
                        if stopping:
                            return
                except Exception as err:  # noqa: BLE001 - a dead watch must fail the test, not go quiet
                    self.problems.append("the watch itself failed: %r" % err)
                    return
                if stopping:  # slurmrestd is down: try again for a while
                    last_chance = last_chance or time.monotonic() + 10
                    if time.monotonic() > last_chance:
                        return
                self._stop.wait(self.interval)

    def _sample(self, client: httpx.Client) -> bool:
        """One sample; False when slurmrestd is down (nothing to compare with)."""
        started = time.monotonic()
        self.tried_at.append(started)
        before = self.harness.kube.peek_ledger(NODE)
        try:
            response = client.get(self.harness.slurm.url + "/fake/state")
        except httpx.TransportError:
            return False
        slurm = response.json()["nodes"][SLURM_NODE]
        after = self.harness.kube.peek_ledger(NODE)
        self.sampled_at.append(started)
        self._check(before, slurm, after)
        return True

    def _check(self, before: dict, slurm: dict, after: dict) -> None:
        count = (slurm["k8scpu"], slurm["k8smemory"])
        used = tuple(slurm["used"])
        moment = "ledger %s, Slurm %s used %s" % ({u: e["state"] for u, e in after.items()}, slurm["gres"], used)
        for i, resource in enumerate(("cpu", "memory")):
            if used[i] + held(before)[i] > CAPACITY[i]:
                self.problems.append("%s: Slurm's usage + Kubernetes' holdings exceed the node: %s" % (resource, moment))
            if self.strict and count[i] + held(before, (names.GRANTED,))[i] > CAPACITY[i]:
                self.problems.append("%s: Slurm can still hand out granted resources (lost grant): %s" % (resource, moment))
            if count[i] < CAPACITY[i] - held(after)[i]:
                self.problems.append(
                    "%s: Slurm's GRES is below what the ledger holds (a grant applied twice, or Slurm "
                    "lowered before the ledger said why): %s" % (resource, moment)
                )
        for uid, entry in after.items():
            states = self.history.setdefault(uid, [])
            if states and ORDER[entry["state"]] < ORDER[states[-1]]:
                self.problems.append("admission %s went back from %s to %s" % (uid, states[-1], entry["state"]))
            if not states or states[-1] != entry["state"]:
                states.append(entry["state"])
        for uid in set(self.history) - set(after):
            self.problems.append("admission %s vanished from the ledger: %s" % (uid, moment))

    def assert_clean(self) -> None:
        assert not self.problems, "\n".join(self.problems[:20])
        times = self.sampled_at
        covered = len(times) >= 2 and times[0] <= self._started and times[-1] >= self._ended
        assert covered, "the watch did not sample both before and after the %.3fs block (%d samples)" % (self.elapsed, len(times))
        # While slurmrestd is down the watch keeps trying (and compares nothing): tries, not samples, show a stall.
        gap = max((later - earlier for earlier, later in zip(self.tried_at, self.tried_at[1:], strict=False)), default=0.0)
        assert gap <= self.max_gap, "the watch stalled for %.2fs (%d samples in %.2fs)" % (gap, len(times), self.elapsed)


def log_messages(harness: CopilotHarness, msg: str, **fields) -> list[dict]:
    return [e for e in harness.copilot.logs() if e.get("msg") == msg and all(e.get(k) == v for k, v in fields.items())]


def assert_converged(harness: CopilotHarness, granted: dict, fresh_copilot: bool = False) -> None:
    """Exactly ``granted`` (uid -> (cpu, memory)) in the ledger, all Granted, Slurm's GRES the node minus them;
    with ``fresh_copilot``, also nothing left for a copilot starting now to do (its ``--once --dry-run`` plan)."""
    ledger = harness.kube.ledger(NODE)
    assert {uid: e["state"] for uid, e in ledger.items()} == dict.fromkeys(granted, names.GRANTED)
    uids = [a["uid"] for a in harness.kube.generic_node(NODE)["spec"]["admissions"]]
    assert sorted(uids) == sorted(granted), uids
    assert harness.slurm.counts(SLURM_NODE) == expected_counts(*granted.values())
    assert harness.slurm.state()["violations"] == []
    if fresh_copilot:
        plan = harness.copilot.once(dry_run=True)
        assert plan["returncode"] == 0 and plan["actions"] == [], plan


def harness_in(workdir, **options) -> CopilotHarness:
    return CopilotHarness(workdir, nodes={SLURM_NODE: CAPACITY}, **options)


def started(harness: CopilotHarness, pods=("p1",)) -> CopilotHarness:
    harness.share(NODE, SLURM_NODE, pods=pods)
    harness.copilot.start()
    return harness


# -- slurmrestd restart --------------------------------------------------------------------------


def admit_while_slurmrestd_is_down(harness: CopilotHarness, uid: str, pod: str, request, keep_state: bool) -> None:
    failed_read = "cannot read Slurm: deciding nothing that depends on it"
    harness.slurm.kill()
    failed_reads = len(log_messages(harness, failed_read))
    harness.kube.add_admission(NODE, uid, pod, *request)
    wait_until(lambda: len(log_messages(harness, failed_read)) > failed_reads, 10, 0.05, "a pass that could not read Slurm")
    # Deciding without Slurm would grant on a GRES nobody can see: the admission must wait.
    assert uid not in harness.kube.ledger(NODE)
    harness.slurm.restart(keep_state=keep_state)
    harness.kube.wait_for_admission(NODE, uid, names.GRANTED, timeout=15)


def test_admissions_wait_out_slurmrestd_restarts_and_are_granted_once_it_is_back(tmp_path):
    granted = {"a1": ("1", "1Gi"), "a2": ("1500m", "2000Mi"), "a3": ("2", "3Gi")}
    with harness_in(tmp_path) as harness:
        started(harness, pods=("p1", "p2", "p3"))
        harness.kube.add_admission(NODE, "a1", "p1", *granted["a1"])
        harness.kube.wait_for_admission(NODE, "a1", names.GRANTED)
        # slurmrestd restarts; slurmctld keeps Slurm's state, the lowered GRES included.
        with CapacityWatch(harness) as watch:
            admit_while_slurmrestd_is_down(harness, "a2", "p2", granted["a2"], keep_state=True)
        watch.assert_clean()
        assert_converged(harness, {uid: granted[uid] for uid in ("a1", "a2")})
        # slurmctld restarts too: the GRES is back at slurm.conf's counts until the copilot lowers it again,
        # so Slurm could hand out granted resources meanwhile (the Overcommitted case): not strict.
        with CapacityWatch(harness, strict=False) as watch:
            admit_while_slurmrestd_is_down(harness, "a3", "p3", granted["a3"], keep_state=False)
        watch.assert_clean()
        assert_converged(harness, granted)


# -- Kubernetes API faults -----------------------------------------------------------------------


def test_5xx_on_ledger_writes_are_retried_and_slurm_waits_for_the_ledger(tmp_path):
    with harness_in(tmp_path) as harness:
        started(harness)
        unavailable = harness.kube.inject(Fault(503, "PUT", path=STATUS_PUT, count=1, reason="ServiceUnavailable"))
        with CapacityWatch(harness) as watch:
            harness.kube.add_admission(NODE, "a1", "p1", cpu="2", memory="2Gi")
            wait_until(lambda: unavailable.count == 0, 10, what="the 503 answered")
            # The ledger write failed, so the GRES must not have moved: Slurm changes follow the ledger.
            assert harness.slurm.counts(SLURM_NODE) == CAPACITY
            harness.kube.wait_for_admission(NODE, "a1", names.GRANTED, timeout=20)
        watch.assert_clean()
        failures = log_messages(harness, "action failed", action="WriteStatus", temporary=True)
        assert len(failures) == 1, failures
        assert_converged(harness, {"a1": ("2", "2Gi")})


def test_a_writer_between_the_copilots_read_and_write_makes_it_decide_again(tmp_path):
    with harness_in(tmp_path) as harness:
        started(harness, pods=("p1", "q1", "q2"))
        serial = itertools.count(1)

        def scheduler_adds_an_admission(_method, _path):
            number = next(serial)
            entry = {"uid": "b%d" % number, "pod": {"namespace": "default", "name": "q%d" % number}, "request": {"cpu": "500m", "memory": "512Mi"}}
            harness.kube.update_in_process(NODE, lambda obj: obj["spec"]["admissions"].append(entry))

        # Twice in a row, the scheduler's write lands just before the copilot's ledger write arrives.
        harness.kube.intercept("PUT", STATUS_PUT, scheduler_adds_an_admission, count=2)
        with CapacityWatch(harness) as watch:
            harness.kube.add_admission(NODE, "a1", "p1", cpu="1", memory="1Gi")
            for uid in ("a1", "b1", "b2"):
                harness.kube.wait_for_admission(NODE, uid, names.GRANTED, timeout=15)
        watch.assert_clean()
        assert len(log_messages(harness, "ledger changed under us: re-reading")) == 2
        assert_converged(harness, {"a1": ("1", "1Gi"), "b1": ("500m", "512Mi"), "b2": ("500m", "512Mi")})


def test_an_expired_watch_is_listed_again_and_the_admission_it_missed_is_granted(tmp_path):
    # A resync far beyond the test's timeouts: only listing again after the 410 can show a1 in time.
    with harness_in(tmp_path, kube_window=3, copilot_settings={"resync_interval": 300}) as harness:
        started(harness)
        entry = {"uid": "a1", "pod": {"namespace": "default", "name": "p1"}, "request": {"cpu": "2", "memory": "2Gi"}}
        with CapacityWatch(harness) as watch:
            with harness.kube.paused_watches():
                # Five writes while the watch cannot keep up, with three events kept: its position expires.
                harness.kube.update_in_process(NODE, lambda obj: obj["spec"]["admissions"].append(entry))
                for beat in range(4):
                    harness.kube.update_in_process(
                        NODE, lambda obj, beat=beat: obj["metadata"].setdefault("annotations", {}).update({"example.com/heartbeat": str(beat)})
                    )
            harness.kube.wait_for_admission(NODE, "a1", names.GRANTED, timeout=10)
        watch.assert_clean()
        assert log_messages(harness, "watch expired (410): listing again", kind="genericnodes")
        assert_converged(harness, {"a1": ("2", "2Gi")})
        annotations = harness.kube.generic_node(NODE)["metadata"]["annotations"]
        assert annotations == {"example.com/heartbeat": "3"}  # the copilot's own writes kept the other writer's


# -- tokens --------------------------------------------------------------------------------------


def test_tokens_expire_during_the_run_and_every_grant_still_goes_through(tmp_path):
    lifespan, skew = 30, 28  # the shortest lifespan the config allows; slurmrestd's clock 28 s ahead: tokens live 2 s
    pods = ["p%d" % i for i in range(5)]
    with harness_in(tmp_path, copilot_settings={"token": {"lifespan": lifespan}}) as harness:
        started(harness, pods=pods)
        harness.slurm.set_clock_skew(skew)
        checked_from = time.time()
        granted = {}
        with CapacityWatch(harness) as watch:
            for pod in pods:
                uid = "a-" + pod
                harness.kube.add_admission(NODE, uid, pod, cpu="500m", memory="500Mi")
                harness.kube.wait_for_admission(NODE, uid, names.GRANTED, timeout=10)
                granted[uid] = ("500m", "500Mi")
                time.sleep(1)
        watch.assert_clean()
        requests = [r for r in harness.slurm.audit() if r["t"] >= checked_from]
        expired = [r for r in requests if r["exp"] is not None and r["exp"] < r["now"]]
        accepted = [r for r in requests if r["status"] == 200]
        assert len({r["token"] for r in expired}) >= 2, "tokens did not expire during the run: %s" % requests[-5:]
        assert all(r["status"] == 511 for r in expired), [r for r in expired if r["status"] != 511]
        assert all(r["exp"] >= r["now"] for r in accepted)
        assert not [r for r in requests if r["status"] == 401], "a request went without a token"
        for rejected in {r["token"]: r for r in reversed(expired)}.values():  # each expired token's first 511
            assert any(r["t"] > rejected["t"] and r["token"] != rejected["token"] for r in accepted), "not renewed: %s" % rejected
        # Renewing on 511 happens inside the Slurm client: no pass ever saw a Slurm error.
        errors = [e for e in harness.copilot.logs() if e.get("level") in ("warning", "error")]
        assert errors == [], errors
        assert_converged(harness, granted)


# -- the copilot killed mid-admission ---------------------------------------------------------------


def _ledger_state(harness, uid):
    return (harness.kube.peek_ledger(NODE).get(uid) or {}).get("state")


def _in_spec(harness, uid):
    return any(a.get("uid") == uid for a in harness.kube.peek_generic_node(NODE)["spec"]["admissions"])


KILL_POINTS = (
    # (where, what holds the admission there, the ledger then, whether Slurm's GRES is already lowered)
    ("decided, before the ledger write", "kube-reserve", None, False),
    ("reserved, before the GRES write", "slurm-before", names.RESERVED, False),
    ("GRES lowered, before granted", "slurm-after", names.RESERVED, True),
    ("granted, the ledger write in flight", "kube-grant", names.RESERVED, True),
)
REQUEST = ("1", "1Gi")


def test_a_copilot_killed_at_each_step_of_an_admission_grants_it_exactly_once_after_restart(tmp_path):
    with harness_in(tmp_path) as harness:
        started(harness, pods=["p%d" % n for n in range(1, len(KILL_POINTS) + 1)])
        job = harness.slurm.start_job(SLURM_NODE, 1, 1000)  # Slurm uses part of the node throughout
        assert job is not None
        wait_until(
            lambda: any(
                item["type"] == "Slurm" and item["allocated"]["cpu"] == "1"
                for item in (harness.kube.generic_node(NODE).get("status") or {}).get("allocatedResources") or []
            ),
            10,
            what="the ledger showing Slurm's job",
        )
        granted = {}
        with CapacityWatch(harness) as watch:
            for number, (point, how, ledger_at_kill, lowered_at_kill) in enumerate(KILL_POINTS, 1):
                uid, pod = "a%d" % number, "p%d" % number
                counts_at_kill = expected_counts(*granted.values(), *([REQUEST] if lowered_at_kill else []))
                kube_hold = None
                if how == "kube-reserve":
                    kube_hold = harness.kube.hold("PUT", STATUS_PUT, when=lambda uid=uid: _in_spec(harness, uid) and _ledger_state(harness, uid) is None)
                elif how == "kube-grant":
                    kube_hold = harness.kube.hold("PUT", STATUS_PUT, when=lambda uid=uid: _ledger_state(harness, uid) == names.RESERVED)
                else:
                    harness.slurm.hold("POST", GRES_POST, phase=how.split("-", 1)[1])
                harness.kube.add_admission(NODE, uid, pod, *REQUEST)
                if kube_hold is not None:
                    kube_hold.wait_arrived()
                else:
                    harness.slurm.wait_held()
                seen = (_ledger_state(harness, uid), harness.slurm.counts(SLURM_NODE))
                assert seen == (ledger_at_kill, counts_at_kill), point
                harness.copilot.kill()
                # The request in flight dies with the copilot: it never lands (a write Slurm applied stays applied).
                if kube_hold is not None:
                    kube_hold.release(apply=False)
                else:
                    harness.slurm.release(apply=how == "slurm-after")
                seen = (_ledger_state(harness, uid), harness.slurm.counts(SLURM_NODE))
                assert seen == (ledger_at_kill, counts_at_kill), point
                if lowered_at_kill:
                    harness.copilot.start()
                else:
                    # Slurm never got the lower count: the new copilot must send it, and grant only once Slurm took it.
                    harness.slurm.hold("POST", GRES_POST, phase="before")
                    harness.copilot.start(wait_ready=False)
                    harness.slurm.wait_held(timeout=20)
                    assert _ledger_state(harness, uid) == names.RESERVED, point
                    harness.slurm.release(apply=True)
                    harness.copilot.wait_ready()
                harness.kube.wait_for_admission(NODE, uid, names.GRANTED, timeout=15)
                granted[uid] = REQUEST
                assert harness.slurm.counts(SLURM_NODE) == expected_counts(*granted.values()), point
        watch.assert_clean()
        assert all(states[-1] == names.GRANTED and names.DENIED not in states for states in watch.history.values())
        assert list(harness.slurm.node(SLURM_NODE)["jobs"]) == [str(job)]
        assert_converged(harness, granted, fresh_copilot=True)
