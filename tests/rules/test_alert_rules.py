"""The alert rules checked and unit-tested by Prometheus's own promtool (Debian's prometheus package).

``make rules`` runs this with PROMTOOL set to the promtool that ``make promtool``
extracts from Debian's package into .cache (a cache keyed by the package's
version). The core scenario (its monitoring) runs the same checks with the promtool of
the Prometheus it installs.
"""

import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.hybridhpc.slurm.plugins.module_utils import alert_rules

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def promtool():
    path = os.environ.get("PROMTOOL") or shutil.which("promtool")
    assert path and os.access(path, os.X_OK), "no promtool: run `make rules` (it extracts Debian's into .cache) or set PROMTOOL"
    return path


@pytest.fixture
def rules_dir(tmp_path):
    (tmp_path / "slurm-alerts.rules.yml").write_text(yaml.safe_dump(alert_rules.alert_rules(), sort_keys=False))
    shutil.copy(HERE / "alert_rules.test.yml", tmp_path / "alert_rules.test.yml")
    return tmp_path


def run(promtool, *argv, cwd):
    done = subprocess.run([promtool, *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def test_promtool_accepts_the_rules(promtool, rules_dir):
    rc, out = run(promtool, "check", "rules", "slurm-alerts.rules.yml", cwd=rules_dir)
    assert rc == 0, out
    assert "SUCCESS: %d rules found" % sum(len(g["rules"]) for g in alert_rules.alert_rules()["groups"]) in out


def test_promtool_unit_tests_of_the_rules_pass(promtool, rules_dir):
    rc, out = run(promtool, "test", "rules", "alert_rules.test.yml", cwd=rules_dir)
    assert rc == 0, out


def test_every_alert_is_unit_tested():
    tested = {case["alertname"] for test in yaml.safe_load((HERE / "alert_rules.test.yml").read_text())["tests"]
              for case in test.get("alert_rule_test", [])}
    assert set(alert_rules.ALERTS) == tested
