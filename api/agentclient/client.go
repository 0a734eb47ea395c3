package agentclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
)

// Count is one leaf count: the number of servers online for a node id and type.
type Count = apiv1.Count

// Response is the server's per-item answer to a submission.
type Response = apiv1.CountsResponse

// Defaults of Client.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 30 * time.Second
	DefaultHTTPTimeout = 30 * time.Second
)

// maxResponseBytes bounds a response body read (a 10,000-item answer is about 1 MB).
const maxResponseBytes = 16 << 20

// Submission is one project's counts for one tick.
type Submission struct {
	// Project is the project the token belongs to.
	Project string
	// Timestamp is the start of the tick, aligned to the server's tick (tree.AlignTick).
	Timestamp time.Time
	// ObservedAt is when the counts were sampled; it is the version of the writes, so the
	// newest observation wins whatever order submissions arrive in. Zero means the time Submit
	// is called (fixed once, before the first attempt).
	ObservedAt time.Time
	// SubmissionID identifies the submission (1–128 bytes of [A-Za-z0-9_:-]). Empty means a
	// random id generated once per Submit call and reused by every retry.
	SubmissionID string
	// Counts are the leaf counts, one per (id, type).
	Counts []Count
}

// Client sends submissions to one rollup server. The zero value of each optional field takes
// its default; a Client is safe for concurrent use.
type Client struct {
	// BaseURL is the server's root URL, e.g. "https://rollup.example.com".
	BaseURL string
	// Token is the project's bearer token.
	Token string
	// HTTP is the HTTP client (nil: one with a DefaultHTTPTimeout timeout).
	HTTP *http.Client
	// Logger receives debug logs of retries (nil: none).
	Logger *zap.Logger
	// MaxAttempts bounds the attempts of one Submit, the first included (default 5).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry; it doubles per retry (default 500ms).
	BaseDelay time.Duration
	// MaxDelay caps one backoff, and a server's Retry-After (default 30s).
	MaxDelay time.Duration

	// Test hooks: sleep waits d or until ctx is done; randN draws uniformly in [0, n).
	sleep func(ctx context.Context, d time.Duration) error
	randN func(n int64) int64
}

// APIError is a non-200 answer of the server.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Body is the decoded error body (Error is empty when the body was not rollup's JSON).
	Body apiv1.ErrorResponse
	// RetryAfter is the server's Retry-After, 0 when absent.
	RetryAfter time.Duration
}

// Error describes the answer, listing the invalid fields.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if e.Body.Error != "" {
		fmt.Fprintf(&b, " %s: %s", e.Body.Error, e.Body.Message)
	}
	for _, fe := range e.Body.Errors {
		fmt.Fprintf(&b, "; %s: %s", fe.Field, fe.Message)
	}
	return b.String()
}

// Retryable reports whether resending the same submission may succeed: 5xx answers, 408
// (the body did not reach the server in time) and 429 (the token is over its rate; resend
// after Retry-After); nothing was written for 408 and 429. Any other 4xx will fail the same
// way again.
func (e *APIError) Retryable() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusTooManyRequests
}

// Submit sends s and returns the server's per-item answer. It retries network errors, 408, 429 and 5xx
// answers with the same body (same submission id and observed_at), at most MaxAttempts
// attempts in all, waiting a full-jitter exponential backoff or the server's Retry-After in
// between; any other 4xx is returned at once as an *APIError. After the last attempt the error wraps
// the last failure (an *APIError or a network error).
func (c *Client) Submit(ctx context.Context, s Submission) (*Response, error) {
	if s.SubmissionID == "" {
		s.SubmissionID = NewSubmissionID()
	}
	observed := s.ObservedAt
	if observed.IsZero() {
		observed = time.Now()
	}
	counts := s.Counts
	if counts == nil {
		counts = []Count{}
	}
	body, err := encodeRequest(&apiv1.CountsRequest{
		Project: s.Project, Timestamp: s.Timestamp, ObservedAt: &observed,
		SubmissionID: s.SubmissionID, Counts: counts,
	})
	if err != nil {
		return nil, fmt.Errorf("encode submission: %w", err)
	}
	url := strings.TrimSuffix(c.BaseURL, "/") + apiv1.CountsPath
	auth := "Bearer " + c.Token
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	var lastErr error
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			d := c.delay(attempt-1, lastErr)
			c.logger().Debug("retrying submission", zap.String("submission_id", s.SubmissionID),
				zap.Int("attempt", attempt+1), zap.Duration("after", d), zap.Error(lastErr))
			if err := c.wait(ctx, d); err != nil {
				return nil, fmt.Errorf("submit %s: %w (last failure: %w)", s.SubmissionID, err, lastErr)
			}
		}
		resp, err := c.attempt(ctx, url, body, auth)
		if err == nil {
			if resp.SubmissionID != s.SubmissionID {
				return nil, fmt.Errorf("submit %s: the server answered for submission %q", s.SubmissionID, resp.SubmissionID)
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("submit %s: %w", s.SubmissionID, ctx.Err())
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && !apiErr.Retryable() {
			return nil, fmt.Errorf("submit %s: %w", s.SubmissionID, err)
		}
		lastErr = err
	}
	return nil, fmt.Errorf("submit %s: gave up after %d attempts: %w", s.SubmissionID, attempts, lastErr)
}

// attempt does one POST; any non-200 is an *APIError, a transport failure or unreadable
// 200 body another error.
func (c *Client) attempt(ctx context.Context, url string, body []byte, auth string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	// Header.Set with the values in one allocation (the keys are canonical).
	vals := []string{"application/json", "application/json", auth}
	req.Header["Content-Type"] = vals[0:1:1]
	req.Header["Accept"] = vals[1:2:2]
	req.Header["Authorization"] = vals[2:3:3]
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	data, err := readAnswer(res.Body, res.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		e := &APIError{StatusCode: res.StatusCode, RetryAfter: retryAfter(res.Header.Get("Retry-After"))}
		_ = json.Unmarshal(data, &e.Body) // best effort: a proxy's HTML error page has no body to decode
		return nil, e
	}
	var out Response
	if err := apiv1.DecodeCountsResponse(data, &out); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	return &out, nil
}

// encodeRequest encodes req in a buffer sized for it (one allocation for an agent's request).
func encodeRequest(req *apiv1.CountsRequest) ([]byte, error) {
	size := 192 + len(req.Project) + len(req.SubmissionID)
	for i := range req.Counts {
		size += len(req.Counts[i].ID) + len(req.Counts[i].Type) + 48
	}
	return req.AppendJSON(make([]byte, 0, size))
}

// readAnswer reads a response body to its end (so the connection can be reused), at most
// maxResponseBytes, in one allocation when the server announced the length.
func readAnswer(r io.Reader, length int64) ([]byte, error) {
	r = io.LimitReader(r, maxResponseBytes)
	if length < 0 || length >= maxResponseBytes {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1) // +1: the read that sees EOF needs room
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (c *Client) logger() *zap.Logger {
	if c.Logger == nil {
		return zap.NewNop()
	}
	return c.Logger
}

// delay is the wait before retry number retry (0-based) after failure last: the server's
// Retry-After (capped at MaxDelay) plus up to BaseDelay of jitter when it sent one, else full
// jitter: uniform in [0, min(MaxDelay, BaseDelay×2^retry)).
func (c *Client) delay(retry int, last error) time.Duration {
	base, maxD := c.BaseDelay, c.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxD <= 0 {
		maxD = DefaultMaxDelay
	}
	var apiErr *APIError
	if errors.As(last, &apiErr) && apiErr.RetryAfter > 0 {
		return min(apiErr.RetryAfter, maxD) + time.Duration(c.rand(int64(base)))
	}
	ceiling := maxD
	if retry < 62 && base <= maxD>>uint(retry) {
		ceiling = base << uint(retry)
	}
	return time.Duration(c.rand(int64(ceiling)))
}

func (c *Client) rand(n int64) int64 {
	if c.randN != nil {
		return c.randN(n)
	}
	return mrand.Int64N(n)
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ParseRetryAfter reads a Retry-After header's value: delay-seconds or an HTTP date (RFC 9110
// 10.2.3), capped at a day; ok is false when it is neither (absent included). A date in the
// past, or a negative number, is 0.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	s := strings.TrimSpace(v)
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(min(max(secs, 0), int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(s); err == nil {
		return min(max(t.Sub(now), 0), 24*time.Hour), true
	}
	return 0, false
}

// retryAfter is ParseRetryAfter now, 0 when absent or unreadable.
func retryAfter(v string) time.Duration {
	d, _ := ParseRetryAfter(v, time.Now())
	return d
}

// NewSubmissionID returns a random submission id: 32 hex digits (128 bits).
func NewSubmissionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on platform failure)
	return hex.EncodeToString(b[:])
}

// StartJitter returns how long an agent should wait after a tick boundary before sending
// that tick's counts: uniform in [0, tick/10). With a 5-minute tick, 10,000 agents then
// spread over 30 s (about 333 requests/s) instead of all sending in the same instant.
func StartJitter(tick time.Duration) time.Duration {
	window := int64(tick / 10)
	if window <= 0 {
		return 0
	}
	return time.Duration(mrand.Int64N(window))
}
