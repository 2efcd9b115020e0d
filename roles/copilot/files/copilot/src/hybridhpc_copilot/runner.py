"""The daemon: threads that watch and poll and wake the working loop, a periodic full resync, backoff on
temporary errors, systemd notifications and a watchdog ping every turn of the working loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from . import logs
from .informers import Informer
from .kube import Gone, KubeError, PermanentError
from .passes import Copilot, PassResult
from .systemd import Notifier

log = logs.get("loop")  # the working loop's logger, as before it had modules of its own: log filters read its name


class Runner:
    """Threads that watch and poll, and the working loop they wake."""

    def __init__(self, copilot: Copilot, notifier: Notifier, resync_interval: float = 60.0, poll_interval: float = 5.0,
                 watch_timeout: int = 300, debounce: float = 0.0, max_backoff: float = 60.0):
        self.copilot, self.notifier = copilot, notifier
        self.resync_interval, self.poll_interval, self.watch_timeout = resync_interval, poll_interval, watch_timeout
        self.debounce, self.max_backoff = debounce, max_backoff
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.threads: list[threading.Thread] = []

    def request_stop(self, *_args: object) -> None:
        self.stop.set()
        self.wake.set()

    def changed(self, _what: str | None = None) -> None:
        self.wake.set()

    def _watch_loop(self, informer: Informer[Any]) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                informer.watch(self.watch_timeout)  # lists first while the cache is not synced
                failures = 0
            except Gone:
                log.info("watch expired (410): listing again", extra={"fields": {"kind": informer.kind}})
                try:
                    informer.relist()
                except KubeError as err:
                    failures += 1
                    log.warning("list failed", extra={"fields": {"kind": informer.kind, "error": str(err)}})
            except KubeError as err:
                failures += 1
                self.copilot._count_error(type(err).__name__)
                log.warning("watch failed", extra={"fields": {"kind": informer.kind, "error": str(err)}})
            except Exception as err:  # noqa: BLE001 - a watch thread must not die silently
                failures += 1
                log.error("watch crashed", extra={"fields": {"kind": informer.kind, "error": repr(err)}})
            if failures:
                self.stop.wait(min(self.max_backoff, 2 ** min(failures, 6)))

    def _start(self, name: str, target: Callable[..., object], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def first_sync(self) -> bool:
        """Sync fully until it works (temporary errors back off); False when stopped first."""
        failures = 0
        while not self.stop.is_set():
            self.notifier.watchdog()
            result = self.copilot.sync(full=True)  # PermanentError propagates: bad config, missing CRD, RBAC
            if all(i.synced for i in self.copilot.informers) and not any(
                    kind == "kubernetes" for kind, _m, _t in result.errors):
                return True
            failures += 1
            delay = min(self.max_backoff, 2 ** min(failures, 6))
            log.warning("first sync incomplete: retrying", extra={"fields": {"errors": result.errors, "in": delay}})
            self.stop.wait(delay)
        return False

    def run(self) -> int:
        if not self.first_sync():
            return 0
        if self.copilot.metrics is not None:
            self.copilot.metrics.ready.set(1)
        self.notifier.ready("synced %d GenericNodes" % len(self.copilot.generic_nodes.store))
        log.info("ready", extra={"fields": {"generic_nodes": len(self.copilot.generic_nodes.store)}})
        for informer in self.copilot.informers:
            self._start("watch-" + informer.kind, self._watch_loop, informer)
        self._start("poll-slurm", self.copilot.poller.run, self.poll_interval, self.stop,
                    lambda err: log.warning("Slurm poll failed", extra={"fields": {"error": str(err)}}))
        next_full = time.monotonic() + self.resync_interval
        last_pass = 0.0
        failures = 0
        tick = min(self.resync_interval, (self.notifier.watchdog_seconds or 60) / 2)
        while not self.stop.is_set():
            self.notifier.watchdog()
            woken = self.wake.wait(max(0.0, min(tick, next_full - time.monotonic())))
            if self.stop.is_set():
                break
            full = time.monotonic() >= next_full
            if not (woken or full):
                continue
            if woken and not full:
                # A pass starts `debounce` seconds after the one before ended at the earliest (by default at
                # once): a burst gathers while the pass before runs, and while this wait lasts.
                self.stop.wait(max(0.0, last_pass + self.debounce - time.monotonic()))
            self.wake.clear()
            try:
                result = self.copilot.sync(full=full)
            except PermanentError as err:
                log.error("permanent error: fix it and the next resync retries", extra={"fields": {"error": str(err)}})
                self.notifier.status("error: %s" % err)
                result = PassResult(errors=[("permanent", str(err), False)])
            last_pass = time.monotonic()
            if full:
                next_full = time.monotonic() + self.resync_interval
            if result.errors:
                failures += 1
                next_full = min(next_full, time.monotonic() + min(self.max_backoff, 2 ** min(failures, 6)))
            else:
                failures = 0
        self.notifier.stopping()
        log.info("stopping")
        return 0
