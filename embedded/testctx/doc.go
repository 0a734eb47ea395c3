// Package testctx gives tests their deadlines and their one poll helper: the time a test's
// waits and contexts must end by is derived from the test binary's deadline (go test
// -timeout, t.Deadline), never a short fixed duration that a loaded machine can exceed. A test
// that truly hangs still fails with its own message, a margin before the binary's timeout
// would panic. WaitFor polls a condition nothing signals until that deadline.
//
// It is imported by tests only, of both modules (the service's internal/testctx forwards to
// it); it does not decide what a test asserts (a bound that is the promise under test, such as
// "503 within 2 s", stays in the test, measured around the operation).
package testctx
