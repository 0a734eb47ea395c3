package mongoerr

import (
	"errors"
	"fmt"
)

// Codes used by the embedded server. Names and numbers follow MongoDB's error_codes.yml.
const (
	InternalError             int32 = 1
	BadValue                  int32 = 2
	NoSuchKey                 int32 = 4
	FailedToParse             int32 = 9
	TypeMismatch              int32 = 14
	InvalidLength             int32 = 16
	IllegalOperation          int32 = 20
	NamespaceNotFound         int32 = 26
	IndexNotFound             int32 = 27
	CursorNotFound            int32 = 43
	NamespaceExists           int32 = 48
	DollarPrefixedFieldName   int32 = 52
	InvalidIDField            int32 = 53
	CommandNotFound           int32 = 59
	ImmutableField            int32 = 66
	InvalidOptions            int32 = 72
	InvalidNamespace          int32 = 73
	IndexOptionsConflict      int32 = 85
	IndexKeySpecsConflict     int32 = 86
	NetworkTimeout            int32 = 89
	WriteConcernFailed        int32 = 64
	ConflictingUpdateOps      int32 = 40
	NotWritablePrimary        int32 = 10107
	InterruptedDueToStepDown  int32 = 11602
	Location40352             int32 = 40352
	NotImplemented            int32 = 238
	ChangeStreamHistoryLost   int32 = 286
	ChangeStreamFatalError    int32 = 280
	DuplicateKey              int32 = 11000
	InvalidPipelineOperator   int32 = 168
	IndexAlreadyExists        int32 = 68
	CannotCreateIndex         int32 = 67
	OperationFailed           int32 = 96
	MaxTimeMSExpired          int32 = 50
	Unauthorized              int32 = 13
	BSONObjectTooLarge        int32 = 10334
	InvalidResumeToken        int32 = 260
	ProtocolError             int32 = 17
	APIStrictError            int32 = 323
	InvalidBSON               int32 = 22
	IllegalOpMsgFlag          int32 = 223
	TooManyDocumentSequences  int32 = 233
	ChecksumMismatch          int32 = 288
	NotSingleValueField       int32 = 54
	PathNotViable             int32 = 28
	EmptyFieldName            int32 = 56
	UnsatisfiableWriteConcern int32 = 100
	UnknownReplWriteConcern   int32 = 79
	TransactionTooOld         int32 = 225
	NoMatchingDocument        int32 = 47
	UserNotFound              int32 = 11
	AuthenticationFailed      int32 = 18
	SSLHandshakeFailed        int32 = 141
	MechanismUnavailable      int32 = 334
	// IDLUnknownField is mongod's (unnamed) code for a field a command's schema does not know.
	IDLUnknownField int32 = 40415
)

// Name returns MongoDB's code name for code, or "" when the server does not know it.
func Name(code int32) string {
	switch code {
	case InternalError:
		return "InternalError"
	case BadValue:
		return "BadValue"
	case NoSuchKey:
		return "NoSuchKey"
	case FailedToParse:
		return "FailedToParse"
	case TypeMismatch:
		return "TypeMismatch"
	case InvalidLength:
		return "InvalidLength"
	case IllegalOperation:
		return "IllegalOperation"
	case NamespaceNotFound:
		return "NamespaceNotFound"
	case IndexNotFound:
		return "IndexNotFound"
	case CursorNotFound:
		return "CursorNotFound"
	case NamespaceExists:
		return "NamespaceExists"
	case DollarPrefixedFieldName:
		return "DollarPrefixedFieldName"
	case InvalidIDField:
		return "InvalidIdField"
	case CommandNotFound:
		return "CommandNotFound"
	case ImmutableField:
		return "ImmutableField"
	case InvalidOptions:
		return "InvalidOptions"
	case InvalidNamespace:
		return "InvalidNamespace"
	case IndexOptionsConflict:
		return "IndexOptionsConflict"
	case IndexKeySpecsConflict:
		return "IndexKeySpecsConflict"
	case NetworkTimeout:
		return "NetworkTimeout"
	case WriteConcernFailed:
		return "WriteConcernFailed"
	case ConflictingUpdateOps:
		return "ConflictingUpdateOperators"
	case NotWritablePrimary:
		return "NotWritablePrimary"
	case InterruptedDueToStepDown:
		return "InterruptedDueToStepDown"
	case NotImplemented:
		return "NotImplemented"
	case ChangeStreamHistoryLost:
		return "ChangeStreamHistoryLost"
	case ChangeStreamFatalError:
		return "ChangeStreamFatalError"
	case DuplicateKey:
		return "DuplicateKey"
	case InvalidPipelineOperator:
		return "InvalidPipelineOperator"
	case IndexAlreadyExists:
		return "IndexAlreadyExists"
	case CannotCreateIndex:
		return "CannotCreateIndex"
	case OperationFailed:
		return "OperationFailed"
	case MaxTimeMSExpired:
		return "MaxTimeMSExpired"
	case Unauthorized:
		return "Unauthorized"
	case BSONObjectTooLarge:
		return "BSONObjectTooLarge"
	case InvalidResumeToken:
		return "InvalidResumeToken"
	case ProtocolError:
		return "ProtocolError"
	case APIStrictError:
		return "APIStrictError"
	case InvalidBSON:
		return "InvalidBSON"
	case IllegalOpMsgFlag:
		return "IllegalOpMsgFlag"
	case TooManyDocumentSequences:
		return "TooManyDocumentSequences"
	case ChecksumMismatch:
		return "ChecksumMismatch"
	case NotSingleValueField:
		return "NotSingleValueField"
	case PathNotViable:
		return "PathNotViable"
	case EmptyFieldName:
		return "EmptyFieldName"
	case UnsatisfiableWriteConcern:
		return "UnsatisfiableWriteConcern"
	case UnknownReplWriteConcern:
		return "UnknownReplWriteConcern"
	case TransactionTooOld:
		return "TransactionTooOld"
	case NoMatchingDocument:
		return "NoMatchingDocument"
	case UserNotFound:
		return "UserNotFound"
	case AuthenticationFailed:
		return "AuthenticationFailed"
	case SSLHandshakeFailed:
		return "SSLHandshakeFailed"
	case MechanismUnavailable:
		return "MechanismUnavailable"
	case 6:
		return "HostUnreachable"
	case 7:
		return "HostNotFound"
	case 63:
		return "StaleShardVersion"
	case 91:
		return "ShutdownInProgress"
	case 133:
		return "FailedToSatisfyReadPreference"
	case 150:
		return "StaleEpoch"
	case 189:
		return "PrimarySteppedDown"
	case 234:
		return "RetryChangeStream"
	case 262:
		return "ExceededTimeLimit"
	case 9001:
		return "SocketException"
	case 11600:
		return "InterruptedAtShutdown"
	case 13388:
		return "StaleConfig"
	case 13435:
		return "NotPrimaryNoSecondaryOk"
	case 13436:
		return "NotPrimaryOrSecondary"
	case 171:
		return "CannotIndexParallelArrays"
	case 292:
		return "QueryExceededMemoryLimitNoDiskUseAllowed"
	case 352:
		return "UnsupportedOpQueryCommand"
	}
	return ""
}

// Error is a server error as it appears in a command reply or a writeErrors entry.
type Error struct {
	Code int32
	Msg  string
	// Labels are top-level errorLabels, e.g. RetryableWriteError, NonResumableChangeStreamError.
	Labels []string
	// Extra holds additional reply fields in order (keyPattern/keyValue for E11000).
	Extra []Field
}

// Field is one extra field of an error reply.
type Field struct {
	Key   string
	Value any
}

// Error implements error.
func (e *Error) Error() string {
	if n := Name(e.Code); n != "" {
		return fmt.Sprintf("(%s) %s", n, e.Msg)
	}
	return fmt.Sprintf("(code %d) %s", e.Code, e.Msg)
}

// CodeName returns the code's MongoDB name, or "Location<code>" as mongod does for unnamed codes.
func (e *Error) CodeName() string {
	if n := Name(e.Code); n != "" {
		return n
	}
	return fmt.Sprintf("Location%d", e.Code)
}

// New returns an error with code and a formatted message.
func New(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// NotImplementedf reports a command, stage or operator outside the embedded server's subset.
// The message always names what is missing.
func NotImplementedf(format string, args ...any) *Error {
	return &Error{Code: NotImplemented, Msg: "embedded server does not implement " + fmt.Sprintf(format, args...)}
}

// BadValuef is a shorthand for New(BadValue, ...).
func BadValuef(format string, args ...any) *Error { return New(BadValue, format, args...) }

// FailedToParsef is a shorthand for New(FailedToParse, ...).
func FailedToParsef(format string, args ...any) *Error { return New(FailedToParse, format, args...) }

// TypeMismatchf is a shorthand for New(TypeMismatch, ...).
func TypeMismatchf(format string, args ...any) *Error { return New(TypeMismatch, format, args...) }

// As returns the *Error inside err, or an InternalError wrapping err's text.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: InternalError, Msg: err.Error()}
}

// Is reports whether err carries the given code.
func Is(err error, code int32) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
