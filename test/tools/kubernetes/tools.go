//go:build tools

// Package tools pins the Kubernetes binaries the sandbox and the integration tests run: the API
// server and kubectl always; the kubelet, the scheduler and the controller manager for the sandbox's
// node (`portico sandbox up --kubelet`, scripts/install-tools.sh --kubelet).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
