"""Fixtures: a running API server double and official-client objects pointed at it."""

import pytest

from k8s_double import ApiServer


@pytest.fixture
def api_server():
    with ApiServer(bookmark_interval=0.5) as server:
        yield server


@pytest.fixture
def api_client(api_server, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    path = tmp_path / "kubeconfig"
    path.write_text(api_server.kubeconfig())
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)
    client = kubernetes.client.ApiClient(configuration)
    yield client
    client.close()
