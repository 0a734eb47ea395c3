package store

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Class is what an error of a write means for a retry policy: the bulk writer's and the
// watcher's parent writes (package recompute) classify driver errors the same way.
type Class int

const (
	// ClassNone is a nil error: the command succeeded.
	ClassNone Class = iota
	// ClassDuplicateKey is an E11000 on the unique key: the guarded upsert found no document
	// with a lower version, so the op is retried once; a second E11000 means stale.
	ClassDuplicateKey
	// ClassPermanent is an error that a resend cannot fix: a write error other than E11000
	// (the item is rejected), or a command error such as Unauthorized (the batch is reported
	// unavailable without a resend, so agents keep their data and retry later).
	ClassPermanent
	// ClassWriteConcern is a write-concern error: the writes happened on the primary but are
	// not confirmed durable, so the outcome of the whole batch is unknown.
	ClassWriteConcern
	// ClassUnknownOutcome is a command-level failure after which the batch may or may not have
	// been applied: network errors, NotWritablePrimary and other step-down codes, timeouts,
	// server selection failures, and errors of unknown origin. The batch is resent once.
	ClassUnknownOutcome
	// ClassContext is the caller's context being canceled: no resend.
	ClassContext
)

// String returns the class name for logs.
func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassDuplicateKey:
		return "duplicate_key"
	case ClassPermanent:
		return "permanent"
	case ClassWriteConcern:
		return "write_concern"
	case ClassUnknownOutcome:
		return "unknown_outcome"
	case ClassContext:
		return "context"
	default:
		return "invalid"
	}
}

// transientCodes are server error codes after which a command's outcome is unknown and a
// resend may succeed: the retryable-writes spec's retryable codes plus write-concern and
// time-limit failures.
func transientCode(code int) bool {
	switch code {
	case 6, // HostUnreachable
		7,     // HostNotFound
		50,    // MaxTimeMSExpired
		63,    // StaleShardVersion
		64,    // WriteConcernFailed
		89,    // NetworkTimeout
		91,    // ShutdownInProgress
		134,   // ReadConcernMajorityNotAvailableYet
		150,   // StaleEpoch
		189,   // PrimarySteppedDown
		262,   // ExceededTimeLimit
		9001,  // SocketException
		10107, // NotWritablePrimary
		11600, // InterruptedAtShutdown
		11602, // InterruptedDueToReplStateChange
		13435, // NotPrimaryNoSecondaryOk
		13436: // NotPrimaryOrSecondary
		return true
	}
	return false
}

func duplicateKeyCode(code int, msg string) bool {
	return mongo.IsDuplicateKeyError(mongo.WriteError{Code: code, Message: msg})
}

// Classify says what err means for the retry policy. It is the only place where driver errors
// are interpreted. For a WriteException or BulkWriteException it answers for the whole
// command: ClassWriteConcern if there is a write-concern error, else ClassDuplicateKey if every
// write error is E11000, else ClassPermanent; the writer classifies each write error on its own
// with ClassifyWriteError.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	if errors.Is(err, context.Canceled) {
		return ClassContext
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		wes := make([]mongo.WriteError, len(bwe.WriteErrors))
		for i, we := range bwe.WriteErrors {
			wes[i] = we.WriteError
		}
		return classifyWrites(bwe.WriteConcernError, wes)
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return classifyWrites(we.WriteConcernError, we.WriteErrors)
	}
	var single mongo.WriteError
	if errors.As(err, &single) {
		return ClassifyWriteError(single)
	}
	if mongo.IsTimeout(err) || mongo.IsNetworkError(err) || errors.Is(err, mongo.ErrClientDisconnected) {
		return ClassUnknownOutcome
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		switch {
		case ce.HasErrorLabel("RetryableWriteError"), ce.HasErrorLabel("NetworkError"),
			ce.HasErrorLabel("TransientTransactionError"), transientCode(int(ce.Code)):
			return ClassUnknownOutcome
		case duplicateKeyCode(int(ce.Code), ce.Message):
			return ClassDuplicateKey
		case ce.Code != 0:
			return ClassPermanent
		}
	}
	var wce mongo.WriteConcernError
	if errors.As(err, &wce) {
		return ClassWriteConcern
	}
	var me mongo.MarshalError
	var ia mongo.InvalidArgumentError
	if errors.As(err, &me) || errors.As(err, &ia) {
		// The models cannot be sent at all.
		return ClassPermanent
	}
	// Server selection failures, pool errors and anything unrecognised: the command may or
	// may not have run.
	return ClassUnknownOutcome
}

// ClassifyWriteError classifies one write error of a bulk: ClassDuplicateKey for E11000,
// else ClassPermanent.
func ClassifyWriteError(we mongo.WriteError) Class {
	if duplicateKeyCode(we.Code, we.Message) {
		return ClassDuplicateKey
	}
	return ClassPermanent
}

func classifyWrites(wce *mongo.WriteConcernError, wes []mongo.WriteError) Class {
	if wce != nil {
		return ClassWriteConcern
	}
	if len(wes) == 0 {
		// An exception without write errors or a write-concern error says nothing about
		// what was applied.
		return ClassUnknownOutcome
	}
	for _, we := range wes {
		if ClassifyWriteError(we) != ClassDuplicateKey {
			return ClassPermanent
		}
	}
	return ClassDuplicateKey
}
