//go:build tools

// Package tools pins the etcd server the sandbox and the integration tests run.
package tools

import _ "go.etcd.io/etcd/server/v3"
