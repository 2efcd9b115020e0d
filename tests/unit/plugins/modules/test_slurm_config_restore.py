# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_config_restore: the files the cluster last accepted put back, the rejected change's markers gone."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_config_restore

ACCEPTED = "ClusterName=lab\nPartitionName=debug Nodes=ALL\n"
REJECTED = ACCEPTED + "PartitionName=debug Nodes=ALL TRESBillingWeights=CPU=1.0,Bogus=2\n"


@pytest.fixture
def run_module(module_main):
    return lambda args, check_mode=False: module_main(slurm_config_restore.main, args, check_mode)


@pytest.fixture
def host(tmp_path):
    """A host after a rejected change: slurm.conf replaced, its accepted copy kept, both markers left."""
    conf = tmp_path / "etc" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text(REJECTED)
    os.chmod(conf, 0o640)
    state = tmp_path / "state"
    kept = config_files.accepted_path(str(state), str(conf))
    os.makedirs(os.path.dirname(kept))
    with open(kept, "w") as handle:
        handle.write(ACCEPTED)
    for name in config_files.MARKERS:
        (state / (config_files.MARKER_PREFIX + name)).touch()
    return conf, state


def test_the_accepted_file_is_put_back_with_its_mode_and_the_markers_go(run_module, host):
    conf, state = host
    result = run_module({"files": [str(conf)], "markers_dir": str(state)})
    assert result["changed"] and conf.read_text() == ACCEPTED
    assert oct(conf.stat().st_mode & 0o777) == "0o640"
    assert result["restored"] == {str(conf): ["PartitionName=debug Nodes=ALL TRESBillingWeights=CPU=1.0,Bogus=2"]}
    assert not list(state.glob(config_files.MARKER_PREFIX + "*"))
    assert not run_module({"files": [str(conf)], "markers_dir": str(state)})["changed"]


def test_a_file_without_a_kept_copy_is_named_and_left(run_module, host, tmp_path):
    _conf, state = host
    gres = tmp_path / "etc" / "gres.conf"
    gres.write_text("Name=gpu\n")
    result = run_module({"files": [str(gres)], "markers_dir": str(state)})
    assert result["without_copy"] == [str(gres)] and gres.read_text() == "Name=gpu\n"


def test_a_missing_file_comes_back_readable(run_module, host):
    conf, state = host
    conf.unlink()
    run_module({"files": [str(conf)], "markers_dir": str(state)})
    assert conf.read_text() == ACCEPTED and oct(conf.stat().st_mode & 0o777) == "0o644"


def test_check_mode_puts_nothing_back(run_module, host):
    conf, state = host
    result = run_module({"files": [str(conf)], "markers_dir": str(state)}, check_mode=True)
    assert result["changed"] and conf.read_text() == REJECTED
    assert len(list(state.glob(config_files.MARKER_PREFIX + "*"))) == 2


def test_a_removed_script_comes_back_runnable(run_module, host, tmp_path):
    _conf, state = host
    script = tmp_path / "etc" / "prolog-10-a.sh"
    kept = config_files.accepted_path(str(state), str(script))
    with open(kept, "w") as handle:
        handle.write("#!/bin/sh\ntrue\n")
    os.chmod(kept, 0o755)
    run_module({"files": [str(script)], "markers_dir": str(state)})
    assert script.read_text() == "#!/bin/sh\ntrue\n" and oct(script.stat().st_mode & 0o777) == "0o755"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_a_removed_key_comes_back_its_owners_alone_and_its_bytes_never_shown(run_module, host, tmp_path):
    """The way back to MUNGE removed slurm.key; the accepted configuration still needs it."""
    _conf, state = host
    key = tmp_path / "etc" / "slurm.key"
    kept = config_files.accepted_path(str(state), str(key))
    with open(kept, "w") as handle:
        handle.write("secret-key-bytes\n")
    os.chown(kept, 64030, 64030)
    os.chmod(kept, 0o600)
    result = run_module({"files": [str(key)], "markers_dir": str(state)})
    assert key.read_text() == "secret-key-bytes\n"
    assert oct(key.stat().st_mode & 0o777) == "0o600" and (key.stat().st_uid, key.stat().st_gid) == (64030, 64030)
    assert result["restored"] == {str(key): []} and "secret-key-bytes" not in repr(result)
