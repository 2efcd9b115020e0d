# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_token module.

``scontrol token`` is replaced by FakeScontrol, which answers like scontrol
24.11 talking to slurmctld: ``SLURM_JWT=<token>`` on stdout (a real HS256
token with iat/exp/sun), and for refusals exit status 1 with
``scontrol: error: slurm_fetch_token: error with request: <slurm_strerror>``
on stderr (src/api/token.c).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


import pytest
from ansible.module_utils import basic
from module_args import set_module_args

from ansible_collections.hybridhpc.slurm.plugins.module_utils import jwt
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_token

SCONTROL = "/usr/bin/scontrol"
KEY = b"j" * 32
NOW = 1_700_000_000
FETCH_ERROR = "scontrol: error: slurm_fetch_token: error with request: %s\n"


class FakeScontrol:
    """``scontrol token`` as run by ``caller`` against a slurmctld with these settings."""

    def __init__(self, caller="root", disable_token_creation=False, max_token_lifespan=None, jwt_enabled=True,
                 controller_up=True, users=("root", "slurm", "alice", "bob")):
        self.caller = caller
        self.disable_token_creation = disable_token_creation
        self.max_token_lifespan = max_token_lifespan
        self.jwt_enabled = jwt_enabled
        self.controller_up = controller_up
        self.users = users
        self.calls = []

    def _fail(self, text):
        return 1, "", FETCH_ERROR % text

    def __call__(self, argv, environ_update=None):
        self.calls.append((list(argv), environ_update))
        assert argv[0] == SCONTROL and argv[1] == "token"
        options = {}
        for arg in argv[2:]:
            key, sep, value = arg.partition("=")
            if not sep or key not in ("username", "lifespan"):
                return 1, "", "Invalid option: `%s`\n" % arg
            options[key] = value
        admin = self.caller in ("root", "slurm")
        if not self.controller_up:
            return 1, "", ("scontrol: error: slurm_fetch_token: error receiving response: "
                           "Unable to contact slurm controller (connect failure)\n")
        if self.disable_token_creation and not admin:
            return self._fail("Access/permission denied")
        username = options.get("username", self.caller)
        if (username != self.caller and not admin) or username not in self.users:
            return self._fail("Invalid user id")
        lifespan = int(options.get("lifespan", 0))
        if lifespan and self.max_token_lifespan and lifespan > self.max_token_lifespan and self.caller != "slurm":
            return self._fail("Requested time limit is invalid (missing or exceeds some limit)")
        if not lifespan:
            lifespan = min(1800, self.max_token_lifespan or 1800)
        if not self.jwt_enabled:
            return self._fail("Unable to generate token")
        return 0, "SLURM_JWT=%s\n" % jwt.sign_hs256_token(KEY, username, lifespan, now=NOW), ""


def mint(fake, username=None, lifespan=None, environ=None):
    return slurm_token.mint_token(fake, SCONTROL, username, lifespan, environ)


def test_mints_and_describes_the_token():
    fake = FakeScontrol()
    result = mint(fake, "root", 300)
    assert result["changed"] is False
    assert jwt.decode_hs256_token(result["token"], KEY, now=NOW)["sun"] == "root"
    assert result["username"] == "root"
    assert result["lifespan"] == 300
    assert result["issued_at"] == NOW
    assert result["expires_at"] == NOW + 300
    assert result["cmd"] == [SCONTROL, "token", "username=root", "lifespan=300"]
    assert result["warnings"] == []
    assert fake.calls == [([SCONTROL, "token", "username=root", "lifespan=300"], None)]


def test_defaults_are_slurms():
    fake = FakeScontrol(caller="alice")
    result = mint(fake)
    assert fake.calls[0][0] == [SCONTROL, "token"]
    assert result["username"] == "alice"
    assert result["lifespan"] == 1800


def test_slurm_conf_goes_to_the_environment():
    fake = FakeScontrol()
    mint(fake, "root", 60, {"SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert fake.calls[0][1] == {"SLURM_CONF": "/etc/slurm/slurm.conf"}


@pytest.mark.parametrize("fake, username, lifespan, message", [
    (FakeScontrol(caller="alice", disable_token_creation=True), None, None, "disable_token_creation"),
    (FakeScontrol(caller="alice"), "bob", None, "only root and the SlurmUser may mint tokens for other users"),
    (FakeScontrol(caller="root"), "nobody", None, "the user must exist"),
    (FakeScontrol(caller="alice", max_token_lifespan=600), None, 3600, "max_token_lifespan"),
    (FakeScontrol(jwt_enabled=False), "root", 60, "JWT authentication is not set up"),
    (FakeScontrol(controller_up=False), "root", 60, "could not reach slurmctld"),
])
def test_refusals_are_explained(fake, username, lifespan, message):
    with pytest.raises(slurm_token.TokenError) as err:
        mint(fake, username, lifespan)
    assert message in err.value.msg
    assert "(rc 1)" in err.value.msg
    details = err.value.to_dict()
    assert details["rc"] == 1
    assert details["cmd"][:2] == [SCONTROL, "token"]
    assert "scontrol: error" in details["stderr"]


def test_unknown_failure_keeps_the_output():
    def run(argv, **kwargs):
        return 2, "", "something new went wrong\n"

    with pytest.raises(slurm_token.TokenError) as err:
        mint(run, "root", 60)
    assert err.value.msg == "scontrol token failed (rc 2)"
    assert err.value.stderr == "something new went wrong\n"


def test_no_token_line_is_an_error():
    with pytest.raises(slurm_token.TokenError, match="no SLURM_JWT= line"):
        mint(lambda argv, **kw: (0, "hello\n", ""), "root", 60)


def test_garbage_token_is_an_error():
    with pytest.raises(slurm_token.TokenError, match="not a JWT"):
        mint(lambda argv, **kw: (0, "SLURM_JWT=abc.def\n", ""), "root", 60)


def test_token_without_exp_is_an_error():
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2ln"  # {"sun":"root"}, no exp
    with pytest.raises(slurm_token.TokenError, match="no exp claim"):
        mint(lambda argv, **kw: (0, "SLURM_JWT=%s\n" % token, ""), "root", 60)


def test_warns_when_slurm_grants_something_else():
    def run(argv, **kwargs):
        return 0, "SLURM_JWT=%s\n" % jwt.sign_hs256_token(KEY, "slurm", 100, now=NOW), ""

    result = mint(run, "root", 300)
    assert result["warnings"] == [
        "asked for a lifespan of 300 s, Slurm granted 100 s",
        "asked for a token for root, Slurm issued one for slurm",
    ]


@pytest.mark.parametrize("username, lifespan", [("", None), ("a b", None), ("a=b", None), ("root", 0), ("root", -1)])
def test_bad_arguments_fail_before_running_scontrol(username, lifespan):
    fake = FakeScontrol()
    with pytest.raises(ValueError):
        mint(fake, username, lifespan)
    assert fake.calls == []


# --------------------------------------------------------------------------
# main()


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_token.main() with args; run_command goes to a FakeScontrol."""

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, arg, required=False, opt_dirs=None: SCONTROL)

    def run(fake, args, check_mode=False):
        seen = {}

        def run_command(self, argv, **kwargs):
            seen.update(kwargs)
            return fake(argv, environ_update=kwargs.get("environ_update"))

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        module_args = dict(args, _ansible_check_mode=check_mode)
        set_module_args(monkeypatch, module_args)
        with pytest.raises((ExitJson, FailJson)) as outcome:
            slurm_token.main()
        return outcome.type, outcome.value.args[0], seen

    return run


def test_main_returns_the_token(run_main):
    kind, result, seen = run_main(FakeScontrol(), {"username": "root", "lifespan": 120})
    assert kind is ExitJson
    assert result["changed"] is False
    assert result["username"] == "root"
    assert result["expires_at"] - result["issued_at"] == 120 == result["lifespan"]
    assert jwt.decode_hs256_token(result["token"], KEY, now=NOW)["sun"] == "root"
    assert "warnings" not in result
    assert seen["check_rc"] is False


def test_main_mints_in_check_mode_too(run_main):
    fake = FakeScontrol()
    kind, result, _seen = run_main(fake, {"username": "root"}, check_mode=True)
    assert kind is ExitJson
    assert result["token"]
    assert len(fake.calls) == 1


def test_main_custom_scontrol_and_slurm_conf(run_main):
    fake = FakeScontrol()
    kind, result, _seen = run_main(fake, {"scontrol_path": SCONTROL, "slurm_conf": "/etc/slurm/slurm.conf"})
    assert kind is ExitJson
    assert fake.calls == [([SCONTROL, "token"], {"SLURM_CONF": "/etc/slurm/slurm.conf"})]


def test_main_fails_with_details(run_main):
    kind, result, _seen = run_main(FakeScontrol(caller="alice", disable_token_creation=True), {})
    assert kind is FailJson
    assert "disable_token_creation" in result["msg"]
    assert result["changed"] is False
    assert result["rc"] == 1
    assert "Access/permission denied" in result["stderr"]


def test_main_rejects_bad_lifespan(run_main):
    kind, result, _seen = run_main(FakeScontrol(), {"lifespan": 0})
    assert kind is FailJson
    assert "lifespan must be a positive number" in result["msg"]


def test_main_warns(run_main, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warned.append(msg))

    def short_lived(argv, environ_update=None):
        return 0, "SLURM_JWT=%s\n" % jwt.sign_hs256_token(KEY, "root", 100, now=NOW), ""

    kind, result, _seen = run_main(short_lived, {"username": "root", "lifespan": 300})
    assert kind is ExitJson
    assert result["lifespan"] == 100
    assert "warnings" not in result
    assert warned == ["asked for a lifespan of 300 s, Slurm granted 100 s"]
