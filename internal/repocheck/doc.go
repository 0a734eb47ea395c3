// Package repocheck holds the repository's structural rules as tests: the package layers
// (Layers: each package imports only packages on lower floors, checked against `go list`),
// that service code starts no bare goroutine (a `go` statement outside a conc pool or
// WaitGroup, unless a `//repocheck:go <reason>` comment says why), and that every relative
// link and anchor in README.md and docs/ resolves and every .go file a comment or a doc
// names exists. docs/design/architecture.md's layer drawing is rendered
// from Layers (go test ./internal/repocheck -update rewrites it).
//
// It has no code the product runs; a new package gets its floor here, or the test fails.
package repocheck
