# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A small client for Slurm's REST API (slurmrestd), with JWT authentication.

Standard library plus httpx. httpx is imported lazily-safe: this file imports
without it (ansible-test's import sanity, hosts without the library) and the
client fails with one clear message when it is used without httpx.

slurmrestd facts this relies on (Slurm 24.11, checked on the lab's 24.11.5
unless noted; field names from the data_parser v0.0.42 OpenAPI schema):

* Paths are ``/slurm/{data_parser}/...``; each Slurm major serves a few
  versions and answers 404 for any other (module_utils/slurm_majors.py):
  22.05 v0.0.36-v0.0.38, 24.11 v0.0.40-v0.0.42, 26.05 v0.0.42-v0.0.45. The
  client speaks v0.0.40-v0.0.45 (:data:`DEFAULT_VERSIONS`; every call it
  makes was checked live on 24.11 with v0.0.40-42 and on 26.05.5 with
  v0.0.42-45), so the version is found by ``GET /slurm/{v}/ping``, newest
  first, and cached. When none answers, ``GET /openapi/v3`` (whose ``paths``
  list every version the server serves) names what it serves in the error.
* Without a token slurmrestd answers 401 before it looks at the path (for a
  version it does not serve too): a 401 does not choose a version.
* v0.0.45's ``/ping`` entries drop ``pinged`` and ``mode``: ``responding``
  (a boolean) and ``status`` (``"No error"``, ``"Protocol authentication
  error"``) say the same.
* JWT authentication: headers ``X-SLURM-USER-NAME`` and
  ``X-SLURM-USER-TOKEN``. No token: 401. slurmrestd passes the token on to
  slurmctld, which checks it: a bad token makes ``/ping`` answer 200 with
  ``pinged: DOWN`` and every other call answer 511 (Slurm maps
  SLURM_PROTOCOL_AUTHENTICATION_ERROR to "Network Authentication Required").
* Errors come back as ``{"errors": [{"description", "error", "error_number",
  "source"}], "warnings": [...], "meta": {...}}``. Slurm errors are HTTP 500
  in 24.11 (newer releases map a few to 404/502/504); an unknown job is
  ``error_number`` 2017 (ESLURM_INVALID_JOB_ID), an unknown node 2018
  (ESLURM_INVALID_NODE_NAME).
* ``POST /slurm/{v}/node/{name}`` takes an ``update_node_msg``: address,
  comment, cpu_bind, extra, features, features_act, gres, hostname, name,
  reason, reason_uid, resume_after, state, weight. address, features,
  features_act, hostname, name and state are lists of strings; weight and
  resume_after are ``{"set", "infinite", "number"}`` structs. A ``gres``
  value replaces the node's whole Gres string. Needs an administrator.
* ``POST /slurm/{v}/job/submit`` takes ``{"script": ..., "job":
  job_desc_msg}`` (name, partition, current_working_directory, environment
  as a list of ``K=V``, nodes, tasks, time_limit, standard_output, ...) and
  answers ``job_id`` (v0.0.42; v0.0.40/41 also nest it in ``result``).
* ``GET /slurm/{v}/job/{id}`` and ``/jobs`` answer ``{"jobs": [...]}`` with
  ``job_state`` a list (``["COMPLETED"]``); ``GET /slurm/{v}/nodes`` and
  ``/node/{name}`` answer ``{"nodes": [...]}`` with ``state`` a list
  (``["IDLE", "DRAIN"]``).

Retries (bounded, exponential backoff): connection failures and 503 for
every request; read timeouts, dropped connections, 502 and 504 only for
requests that are safe to repeat (everything but a job submission, which
could otherwise run twice). Never on 500 (a Slurm error: repeating it gives
the same answer) nor on any 4xx.
"""

from __future__ import absolute_import, annotations, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import re
import time
from urllib.parse import quote

from ansible.module_utils.common.parameters import env_fallback

from ansible_collections.hybridhpc.slurm.plugins.module_utils.jwt import (
    JWTError,
    decode_token_unverified,
    token_username,
)

try:
    import httpx
except ImportError as _err:  # keep importable without httpx (sanity tests, bare hosts)
    httpx = None
    HTTPX_IMPORT_ERROR = _err
else:
    HTTPX_IMPORT_ERROR = None

HAS_HTTPX = HTTPX_IMPORT_ERROR is None
HTTPX_REQUIRED_MSG = (
    "the slurmrestd client needs the Python library httpx on this host: "
    "install python3-httpx (Debian/Ubuntu) or pip install httpx"
)

DEFAULT_URL = "http://localhost:6820"
# The data_parser versions the client speaks, newest first (the probe's order).
DEFAULT_VERSIONS = ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40")
# The first data_parser version with ``POST /nodes`` (one update for several nodes; Slurm 24.11).
NODES_UPDATE_SINCE = "v0.0.42"
_VERSION_RE = re.compile(r"^v\d+\.\d+\.\d+$")
USER_HEADER = "X-SLURM-USER-NAME"
TOKEN_HEADER = "X-SLURM-USER-TOKEN"

# update_node_msg fields (v0.0.40-v0.0.42).
NODE_UPDATE_FIELDS = (
    "address",
    "comment",
    "cpu_bind",
    "extra",
    "features",
    "features_act",
    "gres",
    "hostname",
    "name",
    "reason",
    "reason_uid",
    "resume_after",
    "state",
    "weight",
)
_NODE_LIST_FIELDS = ("address", "features", "features_act", "hostname", "name", "state")
_NODE_NO_VAL_FIELDS = ("resume_after", "weight")

# job_desc_msg fields that are *_no_val structs: a plain number is wrapped.
_JOB_NO_VAL_FIELDS = (
    "begin_time",
    "distribution_plane_size",
    "kill_warning_delay",
    "memory_per_cpu",
    "memory_per_node",
    "priority",
    "required_switches",
    "segment_size",
    "time_limit",
    "time_minimum",
)
# job_desc_msg fields that are lists of strings: a comma-separated string is split.
_JOB_CSV_FIELDS = ("excluded_nodes", "required_nodes")

# Batch jobs need an environment; this is what a job gets when none is given.
DEFAULT_JOB_ENVIRONMENT = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)

# Job states after which a job will not run again.
JOB_FINAL_STATES = frozenset((
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
))

ESLURM_INVALID_JOB_ID = 2017
ESLURM_INVALID_NODE_NAME = 2018
_NOT_FOUND_ERRORS = frozenset((ESLURM_INVALID_JOB_ID, ESLURM_INVALID_NODE_NAME))

RETRY_STATUSES = frozenset((502, 503, 504))
# A 503 means the request was not processed, so it is safe to repeat anything.
RETRY_STATUSES_UNSAFE = frozenset((503,))
MAX_BACKOFF = 30.0

_TOKEN_REJECTED_MSG = "token rejected: expired, wrong key, or unknown user"


# --------------------------------------------------------------------------
# Errors


class SlurmrestdError(Exception):
    """A request to slurmrestd failed.

    ``status`` is the HTTP status (``None`` when no answer came), ``errors``
    the ``errors`` list of Slurm's JSON answer (possibly empty).
    """

    def __init__(self, message, status=None, errors=None):
        self.message = message
        self.status = status
        self.errors = list(errors or [])
        super().__init__(message)

    def to_dict(self):
        """Details for ``module.fail_json(msg=str(err), **err.to_dict())``."""
        return {"status": self.status, "errors": self.errors}


class HttpxMissing(SlurmrestdError):
    """httpx is not installed on this host."""


class SlurmrestdUnavailable(SlurmrestdError):
    """slurmrestd could not be reached, or kept answering 502/503/504."""


class UnsupportedVersion(SlurmrestdError):
    """slurmrestd serves none of the API versions this client speaks."""


class AuthenticationRequired(SlurmrestdError):
    """401: slurmrestd got no token (or no usable authentication)."""


class TokenRejected(SlurmrestdError):
    """slurmctld rejected the token: expired, wrong key, or unknown user."""


class SlurmError(SlurmrestdError):
    """Slurm refused or failed the request (HTTP 500 or an ``errors`` list)."""


class NotFound(SlurmrestdError):
    """The job, node or URL does not exist."""


def describe_errors(errors):
    """One line from Slurm's ``errors`` list (description, error text, number, source)."""
    parts = []
    for entry in errors or ():
        if not isinstance(entry, dict):
            parts.append(str(entry))
            continue
        text = [t for t in (entry.get("description"), entry.get("error")) if t]
        line = ": ".join(dict.fromkeys(text)) or "unknown error"
        number = entry.get("error_number")
        extras = []
        if number not in (None, 0):
            extras.append("error %s" % number)
        if entry.get("source"):
            extras.append("from %s" % entry["source"])
        if extras:
            line = "%s (%s)" % (line, ", ".join(extras))
        parts.append(line)
    return "; ".join(parts)


def _error_numbers(errors):
    numbers = set()
    for entry in errors or ():
        if isinstance(entry, dict) and isinstance(entry.get("error_number"), int):
            numbers.add(entry["error_number"])
    return numbers


# --------------------------------------------------------------------------
# Value helpers


def no_val(value):
    """Wrap a number as Slurm's ``{"set", "infinite", "number"}`` struct.

    ``None`` gives an unset value, ``"infinite"``/``"unlimited"`` an infinite
    one; dicts are passed through.
    """
    if isinstance(value, dict):
        return dict(value)
    if value is None:
        return {"set": False, "infinite": False, "number": 0}
    if isinstance(value, str) and value.strip().lower() in ("infinite", "unlimited"):
        return {"set": True, "infinite": True, "number": 0}
    if isinstance(value, bool):
        raise ValueError("expected a number, got %r" % value)
    return {"set": True, "infinite": False, "number": int(value)}


def from_no_val(value):
    """The number in a ``{"set", "infinite", "number"}`` struct (None if unset, ``inf`` if infinite)."""
    if not isinstance(value, dict):
        return value
    if value.get("infinite"):
        return float("inf")
    if not value.get("set"):
        return None
    return value.get("number")


def as_list(value):
    """A list of strings from a list, or from a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return [str(item) for item in value]


# Job ids above this carry a federation's cluster id in their upper bits
# (Slurm's MAX_JOB_ID, 0x03FFFFFF).
MAX_LOCAL_JOB_ID = 0x03FFFFFF


def is_federated_job_id(job_id):
    """Whether ``job_id`` is a federated one (a cluster id in its upper bits).

    >>> is_federated_job_id(134217734), is_federated_job_id(42)
    (True, False)
    """
    try:
        return int(job_id) > MAX_LOCAL_JOB_ID
    except (TypeError, ValueError):
        return False


def job_states(job):
    """A job's states as a list (``job_state`` is a list since v0.0.40, a string before)."""
    state = (job or {}).get("job_state")
    if state is None:
        return []
    if isinstance(state, str):
        return [state]
    return [str(s) for s in state]


def job_finished(job):
    """True once a job reached a state it will not leave (COMPLETED, FAILED, ...)."""
    return bool(JOB_FINAL_STATES.intersection(job_states(job)))


def node_states(node):
    """A node's states and flags as a list, e.g. ``["IDLE", "DRAIN"]``."""
    state = (node or {}).get("state")
    if state is None:
        return []
    if isinstance(state, str):
        return [state]
    return [str(s) for s in state]


def is_node_entry(obj):
    """Whether a JSON object of a ``/nodes`` answer is a node's entry (the only objects with ``real_memory``).

    >>> is_node_entry({"name": "c1", "real_memory": 1000}), is_node_entry({"set": True, "number": 4})
    (True, False)
    """
    return "name" in obj and "real_memory" in obj


def version_key(version):
    """A data_parser version (``v0.0.42``) as numbers to compare: ``(0, 0, 42)``."""
    return tuple(int(n) for n in version[1:].split("."))


def openapi_versions(spec):
    """The data_parser versions an OpenAPI document's paths name (``/slurm/v0.0.42/ping``), oldest first.

    >>> openapi_versions({"paths": {"/slurm/v0.0.42/ping": {}, "/slurmdb/v0.0.41/jobs": {}, "/openapi/v3": {}}})
    ['v0.0.41', 'v0.0.42']
    """
    found = set()
    for path in (spec.get("paths") or {}) if isinstance(spec, dict) else ():
        parts = str(path).strip("/").split("/")
        if len(parts) > 1 and parts[0] in ("slurm", "slurmdb") and _VERSION_RE.match(parts[1]):
            found.add(parts[1])
    return sorted(found, key=version_key)


def unsupported_hint(served):
    """The end of the no-version error: what the server serves and what to do about it."""
    if not served:
        return "; check the data_parser plugins it loads"
    newest = max(DEFAULT_VERSIONS, key=version_key)
    oldest = min(DEFAULT_VERSIONS, key=version_key)
    return "; it serves %s (GET /openapi/v3): this client speaks %s to %s (Slurm 23.11 and later)" % (
        ", ".join(served), oldest, newest)


def ping_up(entry):
    """True when a ``/ping`` entry says its slurmctld answered (``responding``, or ``pinged: UP`` before v0.0.45)."""
    if not isinstance(entry, dict):
        return False
    if entry.get("responding") is True:
        return True
    return str(entry.get("pinged", "")).upper() == "UP"


def node_update_body(fields):
    """The ``update_node_msg`` JSON body for ``fields`` (validated, normalised)."""
    unknown = sorted(set(fields) - set(NODE_UPDATE_FIELDS))
    if unknown:
        raise ValueError(
            "unknown node update field(s) %s; slurmrestd accepts %s" % (", ".join(unknown), ", ".join(NODE_UPDATE_FIELDS))
        )
    body = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key in _NODE_LIST_FIELDS:
            value = as_list(value)
            if key == "state":
                value = [s.upper() for s in value]
        elif key in _NODE_NO_VAL_FIELDS:
            value = no_val(value)
        body[key] = value
    if not body:
        raise ValueError("a node update needs at least one field")
    return body


def job_submit_body(script, job_fields):
    """The ``job_submit_req`` JSON body: ``{"script": ..., "job": {...}}``."""
    if not isinstance(script, str) or not script.strip():
        raise ValueError("a batch job needs a script")
    if not script.startswith("#!"):
        raise ValueError("a batch script must start with a #! line (for example #!/bin/sh)")
    job = {}
    for key, value in job_fields.items():
        if value is None:
            continue
        if key == "script":
            raise ValueError("give the script as the first argument, not as a job field")
        if key == "environment":
            if isinstance(value, dict):
                value = ["%s=%s" % (k, v) for k, v in value.items()]
            else:
                value = [str(v) for v in value]
        elif key in _JOB_NO_VAL_FIELDS and not isinstance(value, dict):
            value = no_val(value)
        elif key in _JOB_CSV_FIELDS:
            value = as_list(value)
        job[key] = value
    if not job.get("environment"):
        job["environment"] = list(DEFAULT_JOB_ENVIRONMENT)
    return {"script": script, "job": job}


# --------------------------------------------------------------------------
# The client


class SlurmrestdClient:
    """Talk to slurmrestd.

    ``url`` is the base URL (``http://host:6820``); with ``unix_socket`` the
    requests go to that socket and ``url`` only names the host in them.
    ``token`` is a JWT; ``token_provider`` a callable returning a fresh one,
    called when no token is set and once per request after a 401/511 (for
    long-running users that re-sign tokens). ``user`` defaults to the
    token's ``sun`` claim. ``transport`` replaces the network (tests pass an
    ``httpx.MockTransport``); ``sleep`` is how backoff waits.
    """

    def __init__(
        self,
        url=DEFAULT_URL,
        user=None,
        token=None,
        token_provider=None,
        timeout=10.0,
        retries=3,
        backoff=0.5,
        unix_socket=None,
        versions=DEFAULT_VERSIONS,
        transport=None,
        validate_certs=True,
        trust_env=False,
        sleep=time.sleep,
    ):
        if not HAS_HTTPX:
            raise HttpxMissing(HTTPX_REQUIRED_MSG)
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        versions = tuple(versions)
        if not versions:
            raise ValueError("give at least one API version to try")
        self.url = (url or DEFAULT_URL).rstrip("/")
        self.user = user
        self._token = token
        self.token_provider = token_provider
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.versions = versions
        self.unix_socket = unix_socket
        self._sleep = sleep
        self._version = None
        self.last_warnings = []
        if transport is None:
            transport = httpx.HTTPTransport(uds=unix_socket, verify=validate_certs, trust_env=trust_env)
        self._http = httpx.Client(
            base_url=self.url,
            transport=transport,
            timeout=timeout,
            trust_env=trust_env,
            headers={"Accept": "application/json"},
        )

    # -- life cycle --------------------------------------------------------

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- authentication ----------------------------------------------------

    @property
    def token(self):
        return self._token

    @token.setter
    def token(self, value):
        self._token = value

    def _refresh_token(self):
        token = self.token_provider()
        if not token:
            raise AuthenticationRequired("the token provider returned no token", status=None)
        self._token = token
        return token

    def _auth_headers(self):
        if self._token is None and self.token_provider is not None:
            self._refresh_token()
        if not self._token:
            return {}
        user = self.user
        if not user:
            try:
                user = token_username(decode_token_unverified(self._token))
            except JWTError:
                user = None
        headers = {TOKEN_HEADER: self._token}
        if user:
            headers[USER_HEADER] = user
        return headers

    # -- transport ---------------------------------------------------------

    def _wait(self, attempt):
        self._sleep(min(MAX_BACKOFF, self.backoff * (2 ** attempt)))

    def _send(self, method, path, body=None, idempotent=True):
        """Send one request with retries and token refresh; return the httpx response.

        Raises :class:`SlurmrestdUnavailable` when no usable answer came.
        """
        attempt = 0
        refreshed = False
        while True:
            try:
                response = self._http.request(method, path, json=body, headers=self._auth_headers())
            except httpx.TransportError as err:
                not_sent = isinstance(err, (httpx.ConnectError, httpx.ConnectTimeout))
                if (not_sent or idempotent) and attempt < self.retries:
                    self._wait(attempt)
                    attempt += 1
                    continue
                where = ("unix socket %s" % self.unix_socket) if self.unix_socket else self.url
                raise SlurmrestdUnavailable(
                    "cannot reach slurmrestd at %s (%s %s): %s: %s" % (where, method, path, type(err).__name__, err)
                ) from err
            status = response.status_code
            retryable = RETRY_STATUSES if idempotent else RETRY_STATUSES_UNSAFE
            if status in retryable and attempt < self.retries:
                self._wait(attempt)
                attempt += 1
                continue
            if status in (401, 511) and self.token_provider is not None and not refreshed:
                refreshed = True
                self._refresh_token()
                continue
            return response

    @staticmethod
    def _json(response, object_hook=None):
        try:
            data = response.json(object_hook=object_hook)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _check(self, method, path, response, object_hook=None):
        """Return the JSON answer (each object passed through ``object_hook`` as it is decoded), or raise the error it describes."""
        status = response.status_code
        data = self._json(response, object_hook)
        errors = (data or {}).get("errors") or []
        self.last_warnings = list((data or {}).get("warnings") or [])
        where = "%s %s" % (method, path)
        detail = describe_errors(errors)
        if status == 401:
            raise AuthenticationRequired(
                "%s: HTTP 401: no token sent (set X-SLURM-USER-NAME and X-SLURM-USER-TOKEN)" % where, status, errors
            )
        if status == 511:
            raise TokenRejected("%s: HTTP 511: %s" % (where, _TOKEN_REJECTED_MSG), status, errors)
        if status in RETRY_STATUSES:
            text = detail or response.text.strip()[:300]
            raise SlurmrestdUnavailable("%s: HTTP %d: %s" % (where, status, text or response.reason_phrase), status, errors)
        if _error_numbers(errors) & _NOT_FOUND_ERRORS:
            raise NotFound("%s: %s" % (where, detail), status, errors)
        if status == 404:
            raise NotFound("%s: HTTP 404: %s" % (where, detail or response.text.strip()[:300] or "not found"), status, errors)
        if status >= 400 or errors:
            text = detail or response.text.strip()[:300] or response.reason_phrase
            raise SlurmError("%s: HTTP %d: %s" % (where, status, text), status, errors)
        if data is None:
            raise SlurmrestdError("%s: HTTP %d: the answer is not a JSON object" % (where, status), status)
        return data

    # -- API version -------------------------------------------------------

    @property
    def version(self):
        """The data_parser version in use (``v0.0.42``, ...), probed once with ``GET /ping``."""
        if self._version is None:
            self._probe_version()
        return self._version

    def _probe_version(self):
        for candidate in self.versions:
            path = "/slurm/%s/ping" % candidate
            response = self._send("GET", path)
            if response.status_code == 404:
                continue
            if response.status_code >= 400:
                # 401 comes before routing: it says nothing about the version.
                self._check("GET", path, response)
            self._version = candidate
            return candidate
        served = self.served_versions()
        raise UnsupportedVersion(
            "slurmrestd at %s serves none of the API versions %s (all answered 404)%s"
            % (self.unix_socket or self.url, ", ".join(self.versions), unsupported_hint(served)),
            404,
        )

    def served_versions(self):
        """The data_parser versions slurmrestd serves, from the paths of ``GET /openapi/v3``, oldest first.

        An empty list when the server does not tell (an error, no JSON).
        """
        try:
            response = self._send("GET", "/openapi/v3")
        except SlurmrestdError:
            return []
        data = self._json(response) if response.status_code == 200 else None
        return openapi_versions(data or {})

    def request(self, method, endpoint, body=None, idempotent=True, object_hook=None):
        """``METHOD /slurm/{version}/{endpoint}``; return the JSON answer or raise.

        ``object_hook`` is :func:`json.loads`'s: every object of the answer goes through it as it is decoded.
        """
        path = "/slurm/%s/%s" % (self.version, endpoint.lstrip("/"))
        return self._check(method, path, self._send(method, path, body=body, idempotent=idempotent), object_hook)

    # -- controller --------------------------------------------------------

    def ping(self):
        """The ``pings`` list of ``GET /ping``: one entry per slurmctld (hostname, pinged, responding, mode, ...)."""
        return list(self.request("GET", "ping").get("pings") or [])

    def check_auth(self):
        """Make sure slurmctld accepts the token; return the pings.

        ``/ping`` answers 200 even for a bad token, with every controller
        ``DOWN``, just as when slurmctld is down. When no controller is up,
        ``GET /diag`` tells the two apart: it fails with 511
        (:class:`TokenRejected`) for a bad token, and with a Slurm error
        (:class:`SlurmError`) when slurmctld does not answer.
        """
        pings = self.ping()
        if any(ping_up(p) for p in pings):
            return pings
        try:
            self.request("GET", "diag")
        except TokenRejected:
            raise
        except SlurmrestdError as err:
            raise SlurmError(
                "no slurmctld answers ping (%s): %s" % (", ".join(str(p.get("hostname")) for p in pings), err),
                err.status,
                err.errors,
            ) from err
        pings = self.ping()
        if not any(ping_up(p) for p in pings):
            raise TokenRejected("every slurmctld answered ping DOWN: " + _TOKEN_REJECTED_MSG, 200)
        return pings

    def diag(self):
        """``GET /diag``: scheduler statistics."""
        return self.request("GET", "diag")

    # -- nodes -------------------------------------------------------------

    def nodes(self, each=None):
        """Every node, as slurmrestd describes it; or ``each(node)`` of every node.

        With ``each``, a node is handed to it as soon as it is decoded, and only
        what it returns is kept: a caller that needs a few fields of thousands
        of nodes never holds them all decoded at once (10,000 nodes of about 60
        fields each are tens of megabytes as Python objects).
        """
        if each is None:
            return list(self.request("GET", "nodes").get("nodes") or [])
        done = {}  # id of what each() returned -> it (kept alive, so no id is reused meanwhile)

        def hook(obj):
            if not is_node_entry(obj):
                return obj
            result = each(obj)
            done[id(result)] = result
            return result

        entries = self.request("GET", "nodes", object_hook=hook).get("nodes") or []
        # An entry the hook could not tell for a node still goes through each(), once.
        return [entry if id(entry) in done else each(entry) for entry in entries]

    def node(self, name):
        """One node, or ``None`` when Slurm does not know it.

        An unknown node is error 2018 (ESLURM_INVALID_NODE_NAME); when
        slurmrestd reports it otherwise, as a bare "Failure to query node"
        (HTTP 500 on 24.11; HTTP 200 with "No error" on 26.05), a node missing
        from ``nodes()`` also reads as ``None``.
        """
        try:
            found = self.request("GET", "node/" + quote(str(name), safe="")).get("nodes") or []
        except NotFound:
            return None
        except SlurmError as err:
            if err.status is not None and (err.status >= 500 or err.status == 200) and all(
                n.get("name") != name for n in self.nodes()
            ):
                return None
            raise
        for entry in found:
            if entry.get("name") == name:
                return entry
        return found[0] if found else None

    def update_node(self, name, /, **fields):
        """``POST /node/{name}`` with an ``update_node_msg`` built from ``fields``.

        ``name`` is positional-only, so the ``name`` field (NodeName list) can
        still be given. List fields take a list or a comma-separated string;
        ``state`` values are upper-cased; ``weight``/``resume_after`` take a
        number.
        """
        body = node_update_body(fields)
        return self.request("POST", "node/" + quote(str(name), safe=""), body=body)

    @property
    def updates_nodes_together(self):
        """Whether ``POST /nodes`` (one update for several nodes) is served: v0.0.42 (Slurm 24.11) and later."""
        return version_key(self.version) >= version_key(NODES_UPDATE_SINCE)

    def update_nodes(self, names, /, **fields):
        """``POST /nodes``: the same ``update_node_msg`` (built from ``fields``) for every node of ``names``.

        One request for what :meth:`update_node` takes one per node. slurmctld
        applies it node by node and answers the first refusal: after an error
        some nodes may have the change and some not. Needs
        :attr:`updates_nodes_together` (``UnsupportedVersion`` before anything is sent).
        """
        names = as_list(names)
        if not names:
            raise ValueError("a node update needs at least one node")
        if not self.updates_nodes_together:
            raise UnsupportedVersion(
                "slurmrestd %s has no POST /nodes (%s and later have it): update the nodes one by one"
                % (self.version, NODES_UPDATE_SINCE)
            )
        body = node_update_body(dict(fields, name=names))
        return self.request("POST", "nodes", body=body)

    def set_nodes_gres(self, names, gres):
        """Set the same whole Gres string on several nodes in one request (see :meth:`update_nodes`)."""
        if not isinstance(gres, str):
            gres = ",".join(as_list(gres))
        return self.update_nodes(names, gres=gres)

    def drain_node(self, name, reason):
        """Drain a node: running jobs finish, no new job starts. Slurm needs a reason."""
        if not reason or not str(reason).strip():
            raise ValueError("draining a node needs a reason")
        return self.update_node(name, state=["DRAIN"], reason=str(reason))

    def resume_node(self, name):
        """Return a drained or down node to service (Slurm refuses for a node that is neither)."""
        return self.update_node(name, state=["RESUME"])

    def set_node_gres(self, name, gres):
        """Set a node's whole Gres string (``gpu:2,shard:8``); the old value is replaced, not merged."""
        if not isinstance(gres, str):
            gres = ",".join(as_list(gres))
        return self.update_node(name, gres=gres)

    # -- jobs --------------------------------------------------------------

    def submit_job(self, script, /, **job_fields):
        """Submit a batch job; return its job id.

        ``job_fields`` are ``job_desc_msg`` fields (``name``, ``partition``,
        ``current_working_directory``, ``nodes``, ``tasks``, ``time_limit``
        in minutes, ``standard_output``, ...). ``environment`` may be a dict;
        without one the job gets a minimal ``PATH`` (Slurm refuses batch
        jobs without an environment). Never retried after the request may
        have reached slurmctld, so a job is not submitted twice.
        """
        body = job_submit_body(script, job_fields)
        data = self.request("POST", "job/submit", body=body, idempotent=False)
        job_id = data.get("job_id")
        if job_id is None and isinstance(data.get("result"), dict):
            job_id = data["result"].get("job_id")
        if job_id is None:
            raise SlurmError("POST job/submit: the answer has no job_id", 200, data.get("errors"))
        return int(job_id)

    def job(self, job_id):
        """One job (the first record for an array or heterogeneous job), or ``None`` once Slurm forgot it.

        Slurm 26.05's slurmrestd rejects a federated job id on ``/job/{id}``
        ("Invalid JobID=... rejected"); such a job is then read from
        ``GET /jobs`` (only for ids with a federation's cluster bits).
        """
        try:
            found = self.request("GET", "job/" + quote(str(job_id), safe="")).get("jobs") or []
        except NotFound:
            found = self._listed(job_id)
        for entry in found:
            if str(entry.get("job_id")) == str(job_id):
                return entry
        return found[0] if found else None

    def _listed(self, job_id):
        """The ``GET /jobs`` records of a federated job id that ``/job/{id}`` answered as unknown ([] otherwise)."""
        if not is_federated_job_id(job_id):
            return []
        return [j for j in self.jobs() if str(j.get("job_id")) == str(job_id)]

    def jobs(self):
        """Every job slurmctld still knows."""
        return list(self.request("GET", "jobs").get("jobs") or [])

    def cancel_job(self, job_id):
        """Cancel a job (SIGKILL to its steps, as ``scancel``). A job Slurm already forgot is no error.

        A federated job id that 26.05's ``/job/{id}`` rejects while ``GET /jobs``
        still lists the job is cancelled through ``DELETE /jobs`` instead.
        """
        try:
            self.request("DELETE", "job/" + quote(str(job_id), safe=""))
        except NotFound:
            if not self._listed(job_id):
                return False
            self.request("DELETE", "jobs/", body={"jobs": [str(job_id)]})
        return True


# --------------------------------------------------------------------------
# Ansible glue (doc fragment hybridhpc.slurm.slurmrestd)


def slurmrestd_argument_spec():
    """Options of the doc fragment hybridhpc.slurm.slurmrestd, as an argument_spec."""
    return {
        "slurmrestd_url": {"type": "str", "default": DEFAULT_URL},
        "slurmrestd_unix_socket": {"type": "path"},
        "slurmrestd_user": {"type": "str"},
        "slurmrestd_token": {"type": "str", "no_log": True, "fallback": (env_fallback, ["SLURM_JWT"])},
        "slurmrestd_timeout": {"type": "float", "default": 10.0},
        "slurmrestd_validate_certs": {"type": "bool", "default": True},
    }


def client_from_params(params, **kwargs):
    """A client for the doc fragment's options (``module.params``)."""
    return SlurmrestdClient(
        url=params.get("slurmrestd_url") or DEFAULT_URL,
        user=params.get("slurmrestd_user"),
        token=params.get("slurmrestd_token"),
        timeout=params.get("slurmrestd_timeout") or 10.0,
        unix_socket=params.get("slurmrestd_unix_socket"),
        validate_certs=params.get("slurmrestd_validate_certs", True),
        **kwargs,
    )


def client_from_module(module, **kwargs):
    """A client for an AnsibleModule; fails the module cleanly when httpx is missing."""
    if not HAS_HTTPX:
        module.fail_json(msg=HTTPX_REQUIRED_MSG, exception=repr(HTTPX_IMPORT_ERROR))
    return client_from_params(module.params, **kwargs)
