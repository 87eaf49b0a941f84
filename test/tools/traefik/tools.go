//go:build tools

// Package tools pins Traefik, the ingress controller the sandbox (`--data-plane traefik`) and the
// test/e2e/traefik-*.test.ts tests run.
package tools

import (
	_ "github.com/traefik/traefik/v3/cmd/traefik"
)
