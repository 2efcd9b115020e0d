"""A stateful Kubernetes API server double for tests (no real API server can run here).

    from k8s_double import ApiServer
    with ApiServer() as server:          # thread on a random loopback port
        server.url, server.kubeconfig()  # plain HTTP, bearer token

Or standalone: ``python -m k8s_double --port 8443 --kubeconfig-out PATH``
(run from tests/, or with tests/ on PYTHONPATH).

What it does like the real one: one global resourceVersion bumped by every
write; 409 Conflict for a stale resourceVersion on update or patch; 422 for
an update without one (custom resources) and for schema violations; merge
patch, JSON patch, strategic merge patch (core kinds only, applied as a
merge: custom resources answer 415 as the real server does) and server-side
apply (as a merge); the status subresource (``/status`` writes only status,
main writes keep it); unknown fields pruned by the CRD's openAPIV3Schema;
label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors;
list and watch (newline-delimited JSON, ADDED/MODIFIED/DELETED, selector
transitions as ADDED/DELETED, BOOKMARKs, an ERROR event with a 410 ``Status``
once the resourceVersion left the retained window); finalizers and
deletionTimestamp; namespaces (objects need theirs; deleting one deletes its
objects); CRDs (served at /apis/{group}/{version}/{plural} once created);
no-op writes do not bump the resourceVersion; discovery (/api, /apis,
/api/v1, /apis/{group}[/{version}], /version) for the kubernetes client and
kubernetes.core.k8s. Test hooks: ``inject(Fault(...))``, ``state.compact()``,
``requests``.
"""

from .server import ApiServer, Fault
from .state import ApiError, State

__all__ = ["ApiServer", "ApiError", "Fault", "State"]
