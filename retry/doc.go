// Package retry is how serve's long-lived components ride out store faults: a capped,
// jittered Backoff, Do (retry an operation until it succeeds, fails permanently or its context
// ends, reporting on a status.Tracker), and IsPermanent, the one rule that separates the errors
// worth retrying from those that must stop serve.
//
// The one idea: permanent means a configuration or programming error that waiting cannot fix
// (an error marked Permanent or with a Permanent() bool method, authentication, an unsupported
// command, arguments the driver refuses); everything else — network errors, timeouts,
// elections, server selection, errors nobody recognises — is retried for as long as the
// context lives.
//
// It is public, not internal, because public packages expose it: watcher.Options.Backoff and
// metrics.Probe.Backoff are Backoff values, and watcher.Run documents its errors as the
// permanent ones (IsPermanent). It does not bound a single write's retries (package bulk does)
// and does not decide what a component's progress is (the component does, on its tracker).
package retry
