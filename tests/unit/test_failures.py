"""tests/failures.py finds why a chain failed in its log."""

import importlib.util
import pathlib

SPEC = importlib.util.spec_from_file_location("failures", pathlib.Path(__file__).parents[1] / "failures.py")
failures = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(failures)


def test_a_step_inside_a_failed_tasks_result_and_the_task_msg():
    log = [
        "TASK [Run steps.py] ***\n",
        'fatal: [localhost]: FAILED! => {"changed": true, "msg": "non-zero return code", "stdout": "step a (reconfigure)'
        ' passed in 49.4s \\nstep b (restart key on beta, job across it) FAILED after 61s: job 12 running: not within'
        ' 60s (last: False)\\n"}\n',
        "ok: [localhost]\n",
    ]
    found = failures.reasons(log)
    assert found == ["step b (restart key on beta, job across it) FAILED after 61s: job 12 running: not within 60s "
                     "(last: False)"]


def test_pytest_and_molecule_verdicts_and_nothing_from_a_passing_log():
    log = ["FAILED tests/unit/test_x.py::test_y - AssertionError: 1 != 2\n",
           "ERROR    Ansible return code was 2, command was: ansible-playbook verify.yml\n",
           "ERROR    Molecule executed 1 scenario (1 failed)\n",
           "fatal: [onprem-ctl1]: FAILED! => {\"msg\": \"Invalid inputs: sssd_ldap_uri: ...\"}\n"]
    assert failures.reasons(log) == ["FAILED tests/unit/test_x.py::test_y - AssertionError: 1 != 2",
                                     "ERROR    Ansible return code was 2, command was: ansible-playbook verify.yml",
                                     "fatal: [onprem-ctl1]: Invalid inputs: sssd_ldap_uri: ..."]
    assert failures.reasons(["ok: [localhost]\n", "PLAY RECAP\n"]) == []


def test_long_reasons_are_cut_and_only_the_last_are_kept():
    log = ["step x (t) FAILED after 1s: " + "y" * 5000 + "\n"] * 20
    found = failures.reasons(log)
    assert len(found) == failures.MAX_REASONS
    assert all(len(text) <= failures.MAX_CHARS + 7 for text in found)


def test_a_site_run_inside_a_step_keeps_its_end():
    log = ["step d (add a node) FAILED after 80s: site.yml  failed:\nPLAY [x]\n" + "ok: [h]\n" * 300
           + "fatal: [lc-a-c3]: FAILED! => slurmd does not answer\n"]
    (found,) = failures.reasons(log)
    assert found.startswith("step d (add a node) FAILED after 80s: site.yml  failed:")
    assert found.endswith("fatal: [lc-a-c3]: FAILED! => slurmd does not answer")
