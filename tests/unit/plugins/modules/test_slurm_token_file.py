"""slurm_token_file: a service's token kept in a file, minted by scontrol only when it must be renewed.

scontrol is the boundary: a script that prints what ``scontrol token`` prints
and counts its calls. The core scenario (its monitoring) runs the module against Slurm.
"""

import getpass
import os
import stat
import time

from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import decode_token_unverified, sign_hs256_token
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_token_file

DAY = 86400


def fake_scontrol(tmp_path, user="slurm-exporter", lifespan=30 * DAY):
    token = sign_hs256_token(b"k" * 32, user, lifespan)
    script = tmp_path / "scontrol"
    script.write_text("#!/bin/sh\necho \"$@\" >> %s/calls\necho SLURM_JWT=%s\n" % (tmp_path, token))
    script.chmod(0o755)
    return str(script), token


def calls(tmp_path):
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def args(tmp_path, scontrol, **extra):
    return dict({"path": str(tmp_path / "token"), "username": "slurm-exporter", "lifespan": 30 * DAY,
                 "owner": getpass.getuser(), "scontrol_path": scontrol}, **extra)


def test_minted_once_then_kept(module_main, tmp_path):
    scontrol, token = fake_scontrol(tmp_path)
    first = module_main(slurm_token_file.main, args(tmp_path, scontrol))
    assert first["changed"] and first["renewed"] == "no token yet" and "token" not in first
    assert (tmp_path / "token").read_text() == token + "\n"
    assert stat.S_IMODE(os.stat(tmp_path / "token").st_mode) == 0o400
    assert calls(tmp_path) == ["token username=slurm-exporter lifespan=%d" % (30 * DAY)]
    second = module_main(slurm_token_file.main, args(tmp_path, scontrol))
    assert not second["changed"] and second["expires_at"] == decode_token_unverified(token)["exp"]
    assert len(calls(tmp_path)) == 1


def test_renewed_with_a_third_left_and_in_check_mode_only_reported(module_main, tmp_path):
    scontrol, _token = fake_scontrol(tmp_path)
    old = sign_hs256_token(b"k" * 32, "slurm-exporter", 30 * DAY, now=int(time.time()) - 25 * DAY)
    (tmp_path / "token").write_text(old + "\n")
    checked = module_main(slurm_token_file.main, args(tmp_path, scontrol), check_mode=True)
    assert checked["changed"] and checked["renewed"].startswith("the stored token expires in")
    assert calls(tmp_path) == [] and (tmp_path / "token").read_text() == old + "\n"
    renewed = module_main(slurm_token_file.main, args(tmp_path, scontrol))
    assert renewed["changed"] and len(calls(tmp_path)) == 1 and (tmp_path / "token").read_text() != old + "\n"


def test_a_mode_drift_alone_is_fixed_without_a_new_token(module_main, tmp_path):
    scontrol, _token = fake_scontrol(tmp_path)
    module_main(slurm_token_file.main, args(tmp_path, scontrol))
    os.chmod(tmp_path / "token", 0o644)
    fixed = module_main(slurm_token_file.main, args(tmp_path, scontrol))
    assert fixed["changed"] and "renewed" not in fixed and len(calls(tmp_path)) == 1
    assert stat.S_IMODE(os.stat(tmp_path / "token").st_mode) == 0o400
