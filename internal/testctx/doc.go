// Package testctx is the service module's name for the tests' deadlines and poll helper,
// which live in embedded/testctx (the embedded module imports nothing of rollup's, so the
// one implementation lives there and this package forwards to it).
package testctx
