# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_reconfigure: what slurmctld logged since the reconfigure is read from where the log ended before it."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_reconfigure


def test_without_a_log_file_the_offset_is_zero():
    # SlurmctldLogFile unset: the journal is read by time, and no path is sized.
    assert slurm_reconfigure.log_size(None) == 0
    assert slurm_reconfigure.log_size("") == 0


def test_only_the_lines_after_the_offset_are_read(tmp_path):
    log = tmp_path / "slurmctld.log"
    log.write_text("[old] fatal: an earlier failure\n")
    offset = slurm_reconfigure.log_size(str(log))
    with open(log, "a") as handle:
        handle.write("[new] Resuming operation, reconfigure failed.\n")
    assert slurm_reconfigure.log_since(None, str(log), offset, 0) == "[new] Resuming operation, reconfigure failed.\n"


def test_a_rotated_log_is_read_from_its_start(tmp_path):
    log = tmp_path / "slurmctld.log"
    log.write_text("short\n")
    assert slurm_reconfigure.log_since(None, str(log), 10 ** 6, 0) == "short\n"
