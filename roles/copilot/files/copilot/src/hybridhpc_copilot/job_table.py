"""The copilot's placeholder jobs as last read, so that a pass reads only its own jobs, by id.

``GET /jobs`` lists every job slurmctld knows: tens of megabytes on a busy
cluster (about 1 kB a job), for the handful that are the copilot's. Its
``update_time`` parameter does not help: slurmctld answers "no change" only
when no job at all changed since then, and the whole list otherwise. So the
table is filled from one listing when the copilot starts (the jobs of a copilot
that ran before) and again every ``sweep_interval`` seconds (a job whose
submission answer was lost, so its id never reached the table); in between,
each pass reads the active jobs it needs with ``GET /job/{id}``, a job the
copilot submits enters with the id Slurm answered, and an ended job is kept
``ended_kept`` seconds (as slurmctld keeps it for MinJobAge) without being read
again. No I/O here: ``slurm.RestSlurm`` does the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .model import PlaceholderJob

# Whose jobs a pass reads: the GenericNode's name -> whether to read its jobs (None: everybody's).
Wanted = Callable[[str], bool] | None


class PlaceholderJobTable:
    def __init__(self, sweep_interval: float = 600.0, ended_kept: float = 300.0):
        self.sweep_interval, self.ended_kept = sweep_interval, ended_kept
        self.jobs: dict[int, PlaceholderJob] = {}
        self._ended_at: dict[int, float] = {}  # job id -> when the table first saw it ended
        self._listed_at: float | None = None

    def listing_due(self, now: float) -> bool:
        """Whether the next read must be a whole listing (never listed yet, or the sweep is due)."""
        return self._listed_at is None or now - self._listed_at >= self.sweep_interval

    def listed(self, jobs: Iterable[PlaceholderJob], now: float) -> None:
        """A whole listing's placeholder jobs: they replace the table."""
        self.jobs, self._ended_at, self._listed_at = {}, {}, now
        for job in jobs:
            self._put(job, now)

    def to_read(self, wanted: Wanted = None) -> list[int]:
        """Ids of the active jobs to read again by id (those of the ``wanted`` GenericNodes)."""
        return sorted(job_id for job_id, job in self.jobs.items()
                      if job.active and (wanted is None or job.owner is None or wanted(job.owner[0])))

    def read(self, job_id: int, job: PlaceholderJob | None, now: float) -> None:
        """What ``GET /job/{id}`` answered: the job, or ``None`` once slurmctld forgot it."""
        if job is None:
            self.jobs.pop(job_id, None)
            self._ended_at.pop(job_id, None)
        else:
            self._put(job, now)

    def submitted(self, job: PlaceholderJob, now: float) -> None:
        """A job Slurm just accepted (pending until a read says otherwise)."""
        self._put(job, now)

    def snapshot(self, now: float) -> list[PlaceholderJob]:
        """Every job in the table, the ended ones older than ``ended_kept`` dropped first."""
        for job_id in [j for j, since in self._ended_at.items() if now - since > self.ended_kept]:
            del self.jobs[job_id], self._ended_at[job_id]
        return list(self.jobs.values())

    def _put(self, job: PlaceholderJob, now: float) -> None:
        self.jobs[job.job_id] = job
        if job.active:
            self._ended_at.pop(job.job_id, None)
        else:
            self._ended_at.setdefault(job.job_id, now)
