"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-scheduler and kwok on 127.0.0.1 (make k8s-test)."""
