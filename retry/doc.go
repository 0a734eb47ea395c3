// Package retry is how serve's long-lived components ride out store faults: a capped,
// jittered Backoff, Do (retry an operation until it succeeds, fails permanently or its context
// ends, reporting on a status.Tracker), and IsPermanent, the one rule that separates the
// errors worth retrying from those that must stop serve.
//
// Permanent means a configuration or programming error that waiting cannot fix: an error that
// says so (Permanent, or a type with a Permanent() bool method such as a duplicate instance
// id or a conflicting index), an authentication or authorization failure, a command or
// feature the store does not support, or arguments the driver refuses. Everything else —
// network errors, timeouts, NotWritablePrimary and the other election codes, server selection
// failures, errors nobody recognises — is transient: retried for as long as the context lives.
//
// It does not bound a single write's retries (package bulk does) and does not decide what a
// component's progress is (the component does, on its tracker).
package retry
