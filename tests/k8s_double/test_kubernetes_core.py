"""kubernetes.core.k8s and k8s_info (the modules the roles use) against the double: apply, idempotence, patch, info, delete."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    gn:
      apiVersion: kai.alibabacloud.com/v1alpha1
      kind: GenericNode
      metadata: {name: k8s-c1, labels: {kai.alibabacloud.com/cluster-name: onprem}}
      spec: {alias: c1, type: Slurm}
  module_defaults:
    group/kubernetes.core.k8s: {kubeconfig: "%(kubeconfig)s"}
  tasks:
    - kubernetes.core.k8s: {state: present, src: "%(crd)s"}
    - kubernetes.core.k8s: {state: present, definition: "{{ gn }}"}
      register: created
    - kubernetes.core.k8s: {state: present, definition: "{{ gn }}"}
      register: again
    - kubernetes.core.k8s:
        definition: "{{ gn | combine({'spec': {'alias': 'c9', 'type': 'Slurm'}}) }}"
      register: changed
    - kubernetes.core.k8s:
        definition:
          - {apiVersion: v1, kind: Namespace, metadata: {name: ack-slurm-operator}}
          - {apiVersion: v1, kind: Secret, metadata: {name: ack-slurm-jwt-token, namespace: ack-slurm-operator}, data: {onprem: YS5iLmM=}}
    - kubernetes.core.k8s_info:
        api_version: kai.alibabacloud.com/v1alpha1
        kind: GenericNode
        label_selectors: ["kai.alibabacloud.com/cluster-name=onprem"]
      register: info
    - kubernetes.core.k8s: {state: absent, api_version: kai.alibabacloud.com/v1alpha1, kind: GenericNode, name: k8s-c1}
      register: deleted
    - ansible.builtin.copy:
        dest: "%(out)s"
        content: "{{ {'created': created.changed, 'again': again.changed, 'changed': changed.changed,
                      'alias': changed.result.spec.alias, 'found': info.resources | length,
                      'deleted': deleted.changed} | to_json }}"
"""


def test_kubernetes_core_modules_work_against_the_double(api_server, tmp_path):
    playbook_bin = pathlib.Path(sys.executable).with_name("ansible-playbook")
    if not playbook_bin.exists():
        pytest.skip("ansible-playbook is not installed next to this Python")
    crd = pathlib.Path(__file__).resolve().parents[2] / "roles/copilot/files/copilot/crd/genericnodes.kai.alibabacloud.com.yaml"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api_server.kubeconfig())
    out = tmp_path / "out.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": kubeconfig, "crd": crd, "out": out})
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run([str(playbook_bin), str(playbook)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert json.loads(out.read_text()) == {"created": True, "again": False, "changed": True, "alias": "c9", "found": 1,
                                           "deleted": True}


def test_reapplying_an_unchanged_crd_changes_nothing(tmp_path):
    """A no-op apply of a CRD keeps its resourceVersion (idempotent playbooks depend on it)."""
    import yaml

    from k8s_double import ApiServer

    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    }
    with ApiServer() as server:
        server.load([crd])
        kinds = server.state.types[("apiextensions.k8s.io", "customresourcedefinitions")]
        before = server.state.get(kinds, None, "widgets.example.com")
        after = server.state.update(kinds, None, "widgets.example.com", yaml.safe_load(yaml.safe_dump(before)))
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
