"""Run site.yml the way AWX runs a job: ansible-runner over an AWX-shaped private data dir.

The test brings up its own three-container lab (tests/integration/awx/hosts.yml,
network hybridhpc-awx), lays out the private data dir as AWX does for a job
(project/ importing the collection's playbooks, the collection installed as an
execution environment has it: from its own built tarball, never the repository
link; inventory/hosts as AWX's inventory script, env/extravars with the
survey answers and the extra vars the credential types inject, the kubeconfig
file under env/, env/envvars, env/settings, no env/ssh_key), and runs:

1. site.yml: successful, rc 0, no injected secret anywhere in stdout or the
   artifacts (job events), and the injected MUNGE key, database password and
   JWT key are the ones on the hosts;
2. site.yml --check: successful with changed=0 for every host;
3. rolling_upgrade.yml in batches of one node, with a newer build of awx-c1's
   Slurm packages in a local apt repository: the job running on awx-c1
   finishes before slurmd restarts with the new packages, awx-c1 (drained by
   the playbook) is resumed, awx-c2 (drained by an administrator, nothing to
   upgrade) is left drained with its reason.

Bounded without pytest-timeout: every subprocess has a timeout and every
runner job a job_timeout (HYBRIDHPC_AWX_JOB_TIMEOUT, default 1800 s).
The lab is removed at the end (labctl.py down --inventory: these hosts and
their network only).
"""

import base64
import glob
import json
import os
import pathlib
import secrets
import shutil
import string
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import awx_injectors  # noqa: E402
import installed_collection  # noqa: E402

pytestmark = pytest.mark.lab

ansible_runner = pytest.importorskip("ansible_runner", reason="ansible-runner is not installed (requirements-dev.txt)")

INVENTORY = ROOT / "tests" / "integration" / "awx" / "hosts.yml"
LABCTL = ROOT / "lab" / "labctl.py"
CTL = "awx-ctl1"
COMPUTE = ["awx-c1", "awx-c2"]
JOB_TIMEOUT = int(os.environ.get("HYBRIDHPC_AWX_JOB_TIMEOUT", "1800"))
BIN = pathlib.Path(sys.executable).parent
DRAIN_REASON_ADMIN = "admin: DIMM errors"


def run(cmd, timeout, **kwargs):
    return subprocess.run([str(c) for c in cmd], check=False, text=True, capture_output=True, timeout=timeout, **kwargs)


def docker_available():
    try:
        res = run(["docker", "info"], timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return res.returncode == 0, (res.stderr or res.stdout).strip()[-300:]


def dexec(host, *cmd, timeout=120):
    res = run(["docker", "exec", host, *cmd], timeout=timeout)
    assert res.returncode == 0, "docker exec %s %s: %s" % (host, " ".join(cmd), res.stderr)
    return res.stdout.strip()


def lab_image():
    """The lab image named by .lab-image, built by lab/build-image.sh when missing."""
    tag_file = ROOT / ".lab-image"
    tag = tag_file.read_text().strip() if tag_file.exists() else ""
    if tag and run(["docker", "image", "inspect", tag], timeout=60).returncode == 0:
        return tag
    res = run([ROOT / "lab" / "build-image.sh"], timeout=1800, cwd=ROOT)
    assert res.returncode == 0, "lab/build-image.sh failed: %s" % res.stderr[-2000:]
    tag = res.stdout.strip().splitlines()[-1]
    tag_file.write_text(tag + "\n")
    return tag


@pytest.fixture(scope="module")
def lab():
    ok, why = docker_available()
    if not ok:
        pytest.skip("docker info failed, no lab possible: %s" % why)
    image = lab_image()
    try:
        res = run([sys.executable, LABCTL, "up", "--inventory", INVENTORY, "--image", image], timeout=600, cwd=ROOT)
        assert res.returncode == 0, "labctl up failed:\n%s\n%s" % (res.stdout, res.stderr)
        yield image
    finally:
        res = run([sys.executable, LABCTL, "down", "--inventory", INVENTORY], timeout=300, cwd=ROOT)
        remove_slurm_cgroups()
        assert res.returncode == 0, "labctl down failed: %s" % res.stderr


def remove_slurm_cgroups():
    """slurmd's cgroup v1 directories of these hosts only (labctl down without --inventory removes all)."""
    for host in (CTL, *COMPUTE):
        for path in sorted(glob.glob("/sys/fs/cgroup/*/slurm_%s" % host), key=len, reverse=True):
            for root, dirs, _files in os.walk(path, topdown=False):
                for name in dirs:
                    try:
                        os.rmdir(os.path.join(root, name))
                    except OSError:
                        pass
            try:
                os.rmdir(path)
            except OSError:
                pass


def random_password(length=32):
    alphabet = string.ascii_letters + string.digits
    return "".join(map(secrets.choice, [alphabet] * length))


@pytest.fixture(scope="module")
def credentials():
    """One credential of each custom type, with fresh random secrets."""
    token = random_password(40)
    kubeconfig = (
        "apiVersion: v1\nkind: Config\ncurrent-context: awx\n"
        "clusters: [{name: awx, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "contexts: [{name: awx, context: {cluster: awx, user: awx}}]\n"
        "users: [{name: awx, user: {token: %s}}]\n" % token
    )
    inputs = {
        "slurm_munge_key.yml": {"munge_key_b64": base64.b64encode(os.urandom(1024)).decode()},
        # Injected on a MUNGE cluster too (a site's template carries it): unused there, never shown.
        "slurm_auth_key.yml": {"slurm_auth_key_b64": base64.b64encode(os.urandom(1024)).decode()},
        "slurm_accounting_database.yml": {"slurmdbd_storage_pass": random_password()},
        # The inventory points no host at a directory (no sssd_ldap_uri): unused, never shown.
        "sssd_ldap_bind.yml": {"sssd_ldap_bind_dn": "cn=sssd,ou=services,dc=example,dc=org",
                               "sssd_ldap_bind_password": random_password()},
        "slurmrestd_jwt_key.yml": {"slurmrestd_jwt_key_b64": base64.b64encode(os.urandom(64)).decode()},
        "kubeconfig.yml": {"kubeconfig": kubeconfig},
    }
    # Every input is a secret but the bind DN (a name, shown like any inventory value).
    secret_values = [v for per_type in inputs.values() for k, v in per_type.items() if k != "sssd_ldap_bind_dn"] + [token]
    return inputs, secret_values


def awx_inventory_script(path, source):
    """inventory/hosts as AWX writes it: a script printing the synced inventory.

    AWX syncs an inventory source with `ansible-inventory --list --export` and
    hands each job `inventory/hosts`, an executable printing that JSON. The
    source is the test's hosts.yml with the lab's group_vars beside it.
    """
    source.mkdir()
    shutil.copy(INVENTORY, source / "hosts.yml")
    (source / "group_vars").mkdir()
    shutil.copy(ROOT / "inventories" / "lab" / "group_vars" / "all.yml", source / "group_vars" / "all.yml")
    res = run([BIN / "ansible-inventory", "-i", source / "hosts.yml", "--list", "--export"], timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    data = json.dumps(json.loads(res.stdout))
    path.write_text("#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % data)
    path.chmod(0o700)


@pytest.fixture(scope="module")
def job_dir(request):
    """A directory of its own (other pytest sessions rotate the shared basetemp); kept when a test failed."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="hybridhpc-awx-job-"))
    failed_before = request.session.testsfailed
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)
    else:
        print("awx job directory kept for inspection: %s" % path)


@pytest.fixture(scope="module")
def collections_path(job_dir):
    """The execution environment's collections: hybridhpc.slurm installed from its own tarball."""
    tarball = installed_collection.build(job_dir / "build")
    installed_collection.install(tarball, job_dir / "ee-collections")
    return job_dir / "ee-collections"


@pytest.fixture(scope="module")
def private_data_dir(job_dir, credentials, collections_path):
    """An AWX job's private data dir, with the credentials injected as their types do."""
    pdd = job_dir
    # The AWX project of a site: its playbooks import the collection's.
    (pdd / "project").mkdir()
    for name in ("site", "rolling_upgrade"):
        (pdd / "project" / ("%s.yml" % name)).write_text(
            "---\n- name: The collection's %s playbook\n  ansible.builtin.import_playbook: hybridhpc.slurm.%s\n" % (name, name))
    (pdd / "inventory").mkdir()
    awx_inventory_script(pdd / "inventory" / "hosts", job_dir / "inventory-source")
    (pdd / "env").mkdir()

    inputs, _secret_values = credentials
    extra_vars = {"slurmd_serial": "100%"}  # the site template's survey answer
    envvars = {
        # The execution environment: the collection installed where Ansible looks.
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path),
        # AWX settings -> "Extra Environment Variables" (AWX_TASK_ENV).
        "ANSIBLE_PIPELINING": "True",
    }
    for type_file, type_inputs in inputs.items():
        ctype = awx_injectors.load_credential_type(ROOT / "awx" / "credential_types" / type_file)
        cred_vars, cred_env, _files = awx_injectors.inject(ctype, type_inputs, str(pdd))
        extra_vars.update(cred_vars)
        envvars.update(cred_env)
    (pdd / "env" / "extravars").write_text(awx_injectors.safe_dump(extra_vars))
    (pdd / "env" / "extravars").chmod(0o600)
    (pdd / "env" / "envvars").write_text(yaml.safe_dump(envvars))
    (pdd / "env" / "settings").write_text(yaml.safe_dump({"job_timeout": JOB_TIMEOUT, "idle_timeout": 900}))
    assert not (pdd / "env" / "ssh_key").exists()
    return pdd


@pytest.fixture(scope="module")
def clean_environment():
    """Run as an AWX job would: no ANSIBLE_* of this shell, the venv's ansible first on PATH."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("ANSIBLE_"):
                mp.delenv(name)
        mp.setenv("PATH", "%s:%s" % (BIN, os.environ.get("PATH", "/usr/bin:/bin")))
        yield


def run_job(pdd, ident, playbook, cmdline=None, extravars=None):
    start = time.monotonic()
    if extravars:
        # Survey answers of this launch, as AWX writes env/extravars per job.
        path = pdd / "env" / "extravars"
        current = yaml.load(path.read_text(), Loader=_UnsafeLoader)
        current.update(extravars)
        path.write_text(awx_injectors.safe_dump(current))
    kwargs = {"cmdline": cmdline} if cmdline else {}
    # As AWX does: runner must not write its arguments (cmdline, envvars...) into
    # env/, where the next job would pick them up (a --check that sticks).
    result = ansible_runner.run(private_data_dir=str(pdd), playbook=playbook, ident=ident, quiet=True,
                                suppress_env_files=True, **kwargs)
    assert sorted(p.name for p in (pdd / "env").iterdir() if not p.name.startswith("tmp")) == ["envvars", "extravars", "settings"]
    elapsed = time.monotonic() - start
    stdout = (pdd / "artifacts" / ident / "stdout").read_text(errors="replace")
    print("%s (%s): %s rc=%s in %.0fs" % (ident, playbook, result.status, result.rc, elapsed))
    assert result.status == "successful" and result.rc == 0, "%s: %s rc=%s\n%s" % (ident, result.status, result.rc, stdout[-6000:])
    return result, stdout


class _UnsafeLoader(yaml.SafeLoader):
    """Reads back env/extravars (strings tagged !unsafe)."""


_UnsafeLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def assert_no_secret(pdd, ident, secret_values, stdout):
    leaks = [i for i, value in enumerate(secret_values) if value in stdout]
    assert not leaks, "secret(s) %s in the job's stdout" % leaks
    for path in (pdd / "artifacts" / ident).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            leaks = [i for i, value in enumerate(secret_values) if value in text]
            assert not leaks, "secret(s) %s in artifact %s" % (leaks, path.relative_to(pdd))


@pytest.fixture(scope="module")
def converged(lab, private_data_dir, credentials, clean_environment):
    result, stdout = run_job(private_data_dir, "site", "site.yml")
    return result, stdout


def test_site_converges_like_an_awx_job(converged, private_data_dir, credentials):
    result, stdout = converged
    inputs, secret_values = credentials
    assert not result.stats["failures"] and not result.stats["dark"]
    assert set(result.stats["ok"]) >= {CTL, *COMPUTE}
    assert any(e.get("event") == "playbook_on_stats" for e in result.events)
    assert_no_secret(private_data_dir, "site", secret_values, stdout)

    # The injected secrets are the cluster's.
    munge = inputs["slurm_munge_key.yml"]["munge_key_b64"]
    for host in (CTL, *COMPUTE):
        assert dexec(host, "base64", "-w0", "/etc/munge/munge.key") == munge, host
    assert dexec(CTL, "base64", "-w0", "/etc/slurm/jwt_hs256.key") == inputs["slurmrestd_jwt_key.yml"]["slurmrestd_jwt_key_b64"]
    conf = dexec(CTL, "cat", "/etc/slurm/slurmdbd.conf")
    assert "StoragePass=%s" % inputs["slurm_accounting_database.yml"]["slurmdbd_storage_pass"] in conf.replace(" ", "")

    # And the cluster works with them.
    out = dexec(CTL, "srun", "-N2", "-t", "1", "hostname", timeout=180)
    assert sorted(out.split()) == COMPUTE


def test_check_mode_changes_nothing(converged, private_data_dir, credentials):
    result, stdout = run_job(private_data_dir, "check", "site.yml", cmdline="--check")
    changed = {host: n for host, n in result.stats["changed"].items() if n}
    assert not changed, "check mode after a converge changed %s" % changed
    assert not result.stats["failures"]
    assert_no_secret(private_data_dir, "check", credentials[1], stdout)


# A newer build of awx-c1's Slurm packages (same upstream version, Debian
# revision +awx1) in a local repository, so the upgrade has something to do.
REPACKAGE = r"""
set -eu
mkdir -p /srv/awx-test/new && cd /srv/awx-test
apt-get download slurmd slurm-client slurm-wlm-basic-plugins >/dev/null
old=$(dpkg-query -W -f '${Version}' slurmd); new="${old}+awx1"
for f in *.deb; do
  rm -rf x; dpkg-deb -R "$f" x
  sed -i "s/$old/$new/g" x/DEBIAN/control
  dpkg-deb -b x "new/${f%%_*}_${new}_amd64.deb" >/dev/null
done
rm -rf x; cd new; : > Packages
for f in *.deb; do
  dpkg-deb -f "$f" >> Packages
  printf 'Filename: ./%s\nSize: %s\nSHA256: %s\n\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)" >> Packages
done
echo 'deb [trusted=yes] file:/srv/awx-test/new ./' > /etc/apt/sources.list.d/awx-test.list
apt-get update -qq
echo "$new"
"""


def node_state_settles(node, wanted, timeout=30):
    """True once sinfo shows ``wanted`` for the node (transient flags such as * may show first)."""
    deadline = time.monotonic() + timeout
    while True:
        state = dexec(CTL, "sinfo", "-h", "-N", "-n", node, "-o", "%T")
        if state == wanted or time.monotonic() > deadline:
            return state == wanted
        time.sleep(2)


def node_field(node, field):
    line = dexec(CTL, "scontrol", "--oneliner", "show", "node", node)
    value = line.split(" %s=" % field, 1)[1]
    return value.split(" [", 1)[0] if field == "Reason" else value.split()[0]


def test_rolling_upgrade_drains_waits_upgrades_and_resumes(converged, private_data_dir, credentials):
    new_version = dexec("awx-c1", "bash", "-c", REPACKAGE, timeout=300).splitlines()[-1]
    dexec(CTL, "scontrol", "update", "nodename=awx-c2", "state=DRAIN", "reason=%s" % DRAIN_REASON_ADMIN)
    job = dexec(CTL, "sbatch", "--parsable", "-w", "awx-c1", "-t", "5", "--wrap", "sleep 45")

    result, stdout = run_job(private_data_dir, "upgrade", "rolling_upgrade.yml",
                             extravars={"slurm_upgrade_batch": "1", "slurm_upgrade_drain_timeout": 600})
    assert not result.stats["failures"]
    assert_no_secret(private_data_dir, "upgrade", credentials[1], stdout)

    assert dexec("awx-c1", "dpkg-query", "-W", "-f", "${Version}", "slurmd") == new_version
    assert dexec("awx-c1", "test", "!", "-e", "/usr/sbin/policy-rc.d") == ""
    # The job ran to its end before slurmd restarted on the new packages.
    state, end = dexec(CTL, "sacct", "-X", "-n", "-P", "-j", job, "-o", "State,End").split("|")
    assert state == "COMPLETED"
    assert node_field("awx-c1", "SlurmdStartTime") >= end
    # Resumed: the playbook drained it. Left alone: an administrator did.
    # (A ping slurmd missed on a loaded machine shows as idle* for a moment.)
    assert node_state_settles("awx-c1", "idle")
    assert dexec(CTL, "sinfo", "-h", "-N", "-n", "awx-c2", "-o", "%T") == "drained"
    assert node_field("awx-c2", "Reason") == DRAIN_REASON_ADMIN
