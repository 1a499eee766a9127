//go:build tools

// Package tools pins the servers the end-to-end tests build: kube-apiserver
// and etcd come from this module's graph, so go.sum fixes their sources.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
