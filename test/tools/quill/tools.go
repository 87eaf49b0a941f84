//go:build tools

// Package tools pins quill (github.com/anchore/quill), which signs the darwin kubectl-portico
// executables ad hoc (`quill sign --ad-hoc`, what `codesign --sign -` does on a Mac) after the
// single-executable blob is injected: scripts/build-plugin-sea.ts, docs/install.md "Releasing
// Portico". Its go.sum is quill's own plus what tidy added (some of its dependencies are not in
// the checksum database the module proxy serves here, so go install quill@version cannot build it).
package tools

import (
	_ "github.com/anchore/quill/cmd/quill"
)
