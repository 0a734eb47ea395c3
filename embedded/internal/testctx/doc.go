// Package testctx gives the embedded module's tests their deadlines: the time a test's waits
// and contexts must end by is derived from the test binary's deadline (go test -timeout,
// t.Deadline), never a short fixed duration that a loaded machine can exceed. A test that
// truly hangs still fails with its own message, a margin before the binary's timeout would
// panic. It is a copy of the service module's internal/testctx: the two modules share no code.
package testctx
