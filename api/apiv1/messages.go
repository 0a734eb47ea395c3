package apiv1

import "time"

// CountsPath is the path of the ingest endpoint (method POST).
const CountsPath = "/v1/counts"

// CountsRequest is the body of POST /v1/counts: one project's counts for one tick.
type CountsRequest struct {
	// Project is the project the counts belong to; the bearer token must belong to it.
	Project string `json:"project"`
	// Timestamp is the start of the tick (RFC 3339, aligned to the server's tick).
	Timestamp time.Time `json:"timestamp"`
	// ObservedAt is when the agent sampled the counts (RFC 3339); it becomes the version of
	// every written document, so a resend must carry the same value. Optional: the server then
	// uses its receive time (a resend then gets a newer version; see the API docs).
	ObservedAt *time.Time `json:"observed_at,omitempty"`
	// SubmissionID identifies the submission (1–128 bytes of [A-Za-z0-9_:-]); a resend reuses it.
	SubmissionID string `json:"submission_id"`
	// Counts are the leaf counts, at most one per (id, type).
	Counts []Count `json:"counts"`
}

// Count is one leaf count: how many servers are online for a node.
type Count struct {
	// ID is the node id (unique within a deployment).
	ID string `json:"id"`
	// Type is the count type.
	Type string `json:"type"`
	// Online is the absolute number online (never an increment).
	Online int64 `json:"online"`
}

// Status is the outcome of one item of a 200 response.
type Status string

// Item statuses.
const (
	// StatusApplied means the value is durably stored.
	StatusApplied Status = "applied"
	// StatusStale means a same-or-newer version is stored for the key: nothing to do (a resend
	// of an already applied submission reports stale).
	StatusStale Status = "stale"
	// StatusRejected means the store refused the item permanently; Error says why. Resending
	// it unchanged will not help.
	StatusRejected Status = "rejected"
)

// CountsResponse is the 200 body of POST /v1/counts: every item's durable outcome.
type CountsResponse struct {
	// SubmissionID echoes the request's submission id.
	SubmissionID string `json:"submission_id"`
	// Project echoes the request's project.
	Project string `json:"project"`
	// Timestamp echoes the request's tick.
	Timestamp time.Time `json:"timestamp"`
	// Version is the version written (observed_at in unix nanoseconds).
	Version int64 `json:"version"`
	// Items has one entry per request item, in request order.
	Items []ItemResult `json:"items"`
	// Summary counts the items per status.
	Summary Summary `json:"summary"`
}

// ItemResult is the outcome of one request item.
type ItemResult struct {
	// Index is the item's position in the request's counts array.
	Index int `json:"index"`
	// ID is the item's node id.
	ID string `json:"id"`
	// Type is the item's type.
	Type string `json:"type"`
	// Status is what happened.
	Status Status `json:"status"`
	// Error says why, for StatusRejected.
	Error string `json:"error,omitempty"`
}

// Summary counts the items of a response per status.
type Summary struct {
	// Applied is the number of items with StatusApplied.
	Applied int `json:"applied"`
	// Stale is the number of items with StatusStale.
	Stale int `json:"stale"`
	// Rejected is the number of items with StatusRejected.
	Rejected int `json:"rejected"`
}

// ErrorResponse is the body of every non-200 answer.
type ErrorResponse struct {
	// Error is a stable machine-readable code (the Err* constants).
	Error string `json:"error"`
	// Message is a human-readable explanation.
	Message string `json:"message"`
	// Errors lists every invalid field, with the item index for item fields (a request
	// header, such as Content-Type, is named as the field when it is the problem).
	Errors []FieldError `json:"errors,omitempty"`
	// RetryAfterSeconds repeats the Retry-After header of a 503.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// ResendSafe is true when resending the same request unchanged is safe (408, 500, 503).
	ResendSafe bool `json:"resend_safe,omitempty"`
}

// FieldError names one invalid field of a request.
type FieldError struct {
	// Index is the position of the item in counts, absent for top-level fields.
	Index *int `json:"index,omitempty"`
	// Field is the JSON path of the field: "timestamp", "counts[3].id"...
	Field string `json:"field"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// Error codes of ErrorResponse.Error, with their HTTP status.
const (
	// ErrMalformedJSON (400): the body is not a JSON object of the expected shape (syntax
	// error, wrong JSON type, unknown field, trailing data).
	ErrMalformedJSON = "malformed_json"
	// ErrMalformedBody (400): the body's bytes are not what its headers say: not valid gzip
	// under Content-Encoding: gzip, compressed without a Content-Encoding, UTF-16 text.
	ErrMalformedBody = "malformed_body"
	// ErrInvalidRequest (400): a top-level field is missing or invalid.
	ErrInvalidRequest = "invalid_request"
	// ErrInvalidItem (400): one or more items are invalid (Errors names each); nothing written.
	ErrInvalidItem = "invalid_item"
	// ErrUnauthorized (401): the bearer token is missing, malformed or unknown.
	ErrUnauthorized = "unauthorized"
	// ErrForbidden (403): the token belongs to another project than the request's.
	ErrForbidden = "forbidden"
	// ErrUnknownProject (404): the token's own project no longer exists.
	ErrUnknownProject = "unknown_project"
	// ErrRequestTimeout (408): the body did not arrive within the server's body read
	// timeout; nothing was written and resending the same request is safe.
	ErrRequestTimeout = "request_timeout"
	// ErrBodyTooLarge (413): the body exceeds the size limit.
	ErrBodyTooLarge = "body_too_large"
	// ErrTooManyItems (413): counts has more items than allowed.
	ErrTooManyItems = "too_many_items"
	// ErrUnsupportedMediaType (415): the Content-Type is not JSON (or has a charset other than
	// UTF-8), or the Content-Encoding is not gzip; Errors names the header.
	ErrUnsupportedMediaType = "unsupported_media_type"
	// ErrOutOfWindow (422): timestamp or observed_at is outside the accepted time window.
	ErrOutOfWindow = "timestamp_out_of_window"
	// ErrUnavailable (503): the store is unreachable; resend the same request after Retry-After.
	ErrUnavailable = "unavailable"
	// ErrRateLimited (429): the token is over its requests or leaves per second; nothing was
	// written; resend the same request after Retry-After.
	ErrRateLimited = "rate_limited"
	// ErrInternal (500): an unexpected server error; resending the same request is safe.
	ErrInternal = "internal"
)
