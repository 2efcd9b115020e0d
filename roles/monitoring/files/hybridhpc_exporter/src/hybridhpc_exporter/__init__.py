# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Prometheus exporter for one Slurm cluster, reading slurmrestd.

Slurm 25.11 and later serve their own metrics (``MetricsType=metrics/openmetrics``,
``GET /metrics/...`` on slurmctld's port). This exporter serves the same names
and labels for 22.05 and 24.11 (``--slurm-names``), and on every major what
Slurm's endpoint does not: each node's state and reason, each controller's
answer, the age of the oldest pending job. The alert rules of the monitoring
role read both. See README.md.
"""

__version__ = "0.1.0"
