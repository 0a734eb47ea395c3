package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
)

// Server serves the ingest API; it is an http.Handler.
type Server struct {
	cfg  Config
	lim  limits
	auth *authCache
	// usage gathers the tokens' last-used times that Run writes.
	usage *usageRecorder
	// limits are the per-token rates.
	limits *tokenLimits
	// held has a slot per 429 being held back (holdBack).
	held chan struct{}
	log  *zap.Logger
	mux  *http.ServeMux
	read reader
	// stats counts the ingest answers.
	stats *ingestStats
	reads *readStats
	// scratch holds the *ingestScratch of ingest requests.
	scratch sync.Pool
}

// ingestScratch is the memory of an ingest request that nothing keeps after its answer is
// written, reused by later requests: the body (then the 200 answer), the parsed and the
// validated request, and the answer. The strings in raw, sub and resp point into the body's
// string, not into buf. The items handed to the Sink (sub.items) are reused too: a Sink keeps
// nothing of them once Submit returns (see Sink).
type ingestScratch struct {
	buf  []byte
	raw  rawRequest
	sub  submission
	resp apiv1.CountsResponse
}

// Sizes of a Server.scratch: new buffers fit an agent's request; larger ones (up to
// maxPooledBuf bytes, maxPooledItems items) are kept for the next large request, larger
// still are left to the GC.
const (
	initialBuf     = 4 << 10
	maxPooledBuf   = 256 << 10
	maxPooledItems = 2048
)

var _ http.Handler = (*Server)(nil)

// NewServer returns the API of cfg (defaults applied). Tokens are looked up in cfg.DB and
// counts handed to cfg.Sink.
func NewServer(cfg Config) *Server {
	return newServer(cfg, mongoTokens{db: cfg.DB})
}

func newServer(cfg Config, store tokenStore) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg: cfg,
		lim: limits{
			maxItems: cfg.MaxItems, maxOnline: cfg.MaxOnline, tick: cfg.Tick,
			lateWindow: cfg.LateWindow, futureSkew: cfg.FutureSkew,
		},
		auth:  newAuthCache(store, cfg.TokenCacheTTL, cfg.Now),
		usage: newUsageRecorder(store, cfg.Logger.Named("api")),
		held:  make(chan struct{}, maxHeldBack),
		limits: newTokenLimits(newRateLimit(cfg.TokenRPS, cfg.TokenBurst, 1),
			newRateLimit(cfg.TokenLeavesPerSecond, cfg.TokenBurst, cfg.MaxItems)),
		log: cfg.Logger.Named("api"),
		mux: http.NewServeMux(),

		stats: newIngestStats(),
		reads: newReadStats(),
	}
	s.mux.HandleFunc("POST "+apiv1.CountsPath, s.handleCounts)
	s.routeReads(cfg)
	return s
}

// Run does the API's background work until ctx ends: it writes the tokens' last-used times
// every TokenUsageInterval (and once more on the way out) and forgets the rate limits of idle
// tokens. Without it the API serves all the same but last_used_at stays unwritten and the
// limits' memory is bounded by maxLimitedTokens only. On its way out it also waits for the
// token lookups that requests share (they outlive the request that started them); after it
// returns, a request that must look its token up does so itself.
func (s *Server) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.TokenUsageInterval)
	defer t.Stop()
	defer s.auth.close()
	for {
		select {
		case <-ctx.Done():
			s.usage.flush(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
			s.usage.flush(ctx)
			s.limits.evictIdle(s.cfg.Now())
		}
	}
}

// admit refuses a revoked or expired token (401 saying which) and a token over its
// requests per second (429, held back: see holdBack), and records the use of any other.
func (s *Server) admit(ctx context.Context, w http.ResponseWriter, info tokenInfo, now time.Time) *httpError {
	if msg := info.refusal(now); msg != "" {
		return s.unauthorizedErr(w, msg)
	}
	s.usage.record(info.hash, now)
	if ok, wait := s.limits.allowRequest(info.hash, now); !ok {
		s.holdBack(ctx, wait)
		return rateLimited(w, wait, fmt.Sprintf("the token is over its %g requests per second", s.limits.requests.rate))
	}
	return nil
}

// holdBack delays a 429 by its Retry-After (whole seconds until the request would be
// allowed), at most maxHoldBack, for at most maxHeldBack requests at once (others are
// answered at once). A runaway agent waits for its answers on its few connections, so
// holding them paces it down to a request per connection and second instead of letting it
// make the server answer a 429 per millisecond; a held request costs a goroutine and a
// timer, no CPU. An agent that honours Retry-After loses nothing: it would wait that long.
func (s *Server) holdBack(ctx context.Context, wait time.Duration) {
	select {
	case s.held <- struct{}{}:
	default:
		return
	}
	defer func() { <-s.held }()
	t := time.NewTimer(min(time.Duration(retryAfterSecondsOf(wait))*time.Second, maxHoldBack))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// rateLimited is the 429 of a token over a limit, with its Retry-After (whole seconds until
// the request would be allowed).
func rateLimited(w http.ResponseWriter, wait time.Duration, msg string) *httpError {
	secs := retryAfterSecondsOf(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return &httpError{status: http.StatusTooManyRequests, body: apiv1.ErrorResponse{
		Error: apiv1.ErrRateLimited, Message: msg + "; nothing was written, resend the same request after Retry-After",
		ResendSafe: true, RetryAfterSeconds: secs,
	}}
}

// Handler returns the routes of the API (POST /v1/counts and the read API under /v1/projects).
func (s *Server) Handler() http.Handler { return s.mux }

// ServeHTTP serves the API's routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) handleCounts(w http.ResponseWriter, r *http.Request) {
	o := s.serveCounts(w, r)
	s.stats.record(o.status, o.code, o.summary)
}

// ingestOutcome is what an ingest request was answered, for Stats.
type ingestOutcome struct {
	status  int
	code    string
	summary apiv1.Summary
}

// failCounts writes e as the answer of an ingest request and returns its outcome.
func (s *Server) failCounts(w http.ResponseWriter, e *httpError) ingestOutcome {
	s.fail(w, e)
	return ingestOutcome{status: e.status, code: e.body.Error}
}

// serveCounts answers an ingest request, in the order of its numbered steps, and returns its
// outcome.
func (s *Server) serveCounts(w http.ResponseWriter, r *http.Request) ingestOutcome {
	now := s.cfg.Now()
	ctx := r.Context()
	// Bound what this request may read, also a body net/http drains after an early answer;
	// readIngestBody gives the body a fresh deadline.
	rc := http.NewResponseController(w)
	boundBody(r, rc, s.cfg.BodyReadTimeout)

	// 1. Who: before reading the body, so an unauthenticated caller learns nothing.
	info, herr := s.ingestCaller(ctx, w, r, now)
	if herr != nil {
		return s.failCounts(w, herr)
	}

	// 2. The body: what it is (415), its bytes (408, 413, 400 malformed_body), then its JSON.
	enc, herr := checkBodyHeaders(w, r.Header)
	if herr != nil {
		return s.failCounts(w, herr)
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	raw, herr := s.readCounts(ctx, w, r, rc, enc, sc, info, now)
	if herr != nil {
		return s.failCounts(w, herr)
	}

	// 3. Which project: any other project than the token's is 403, existing or not.
	if herr := projectRefusal(raw, info); herr != nil {
		return s.failCounts(w, herr)
	}

	// 4. What: every value, all or nothing.
	sub, herr := validate(raw, s.lim, now, &sc.sub)
	if herr != nil {
		return s.failCounts(w, herr)
	}

	// 5. Only leaves: a count under an interior node's key would be the parent's document.
	if herr := s.checkLeaves(ctx, sub); herr != nil {
		return s.failCounts(w, herr)
	}

	// 6. Write.
	resp := &sc.resp
	if herr := s.write(ctx, sub, resp); herr != nil {
		return s.failCounts(w, herr)
	}
	return s.answerWritten(w, sc)
}

// ingestCaller is step 1 of an ingest request: the token of its Authorization header, which
// must be known, admitted (not revoked, expired or over its request rate) and allowed to
// ingest. During a known store outage the answer is 503 at once, whatever the request
// (nothing of it could be written); the body is read first so that the agent sees the answer.
func (s *Server) ingestCaller(ctx context.Context, w http.ResponseWriter, r *http.Request, now time.Time) (tokenInfo, *httpError) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return tokenInfo{}, s.unauthorizedErr(w, "missing or malformed Authorization header; send \"Authorization: Bearer <token>\"")
	}
	if g, ok := s.cfg.Sink.(StoreGate); ok {
		if err := g.Available(ctx); err != nil {
			_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
			s.log.Debug("submission refused: store unavailable", zap.Error(err))
			return tokenInfo{}, unavailable()
		}
	}
	info, found, err := s.auth.lookupByToken(ctx, token, now)
	if err != nil {
		return tokenInfo{}, s.unavailableErr("token lookup", err)
	}
	if !found {
		return tokenInfo{}, s.unauthorizedErr(w, "unknown token")
	}
	if herr := s.admit(ctx, w, info, now); herr != nil {
		return tokenInfo{}, herr
	}
	if info.readOnly {
		return tokenInfo{}, &httpError{status: http.StatusForbidden, body: apiv1.ErrorResponse{
			Error: apiv1.ErrForbidden, Message: "the token is read-only; submitting counts needs an ingest token (rollup token create without --read-only)",
		}}
	}
	return info, nil
}

// readCounts is the rest of step 2 of an ingest request: its body's bytes read into sc's
// buffer and decoded into sc's request, within the token's counts per second (a token over
// it is held back, then answered 429).
func (s *Server) readCounts(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *http.ResponseController,
	enc bodyEncoding, sc *ingestScratch, info tokenInfo, now time.Time,
) (*rawRequest, *httpError) {
	buf, body, herr := s.readIngestBody(w, r, rc, enc, sc.buf[:0])
	sc.buf = buf
	if herr != nil {
		return nil, herr
	}
	raw, herr := decodeBody(body, s.lim.maxItems, &sc.raw)
	if herr != nil {
		return nil, herr
	}
	if ok, wait := s.limits.allowLeaves(info.hash, len(raw.counts), now); !ok {
		s.holdBack(ctx, wait)
		return nil, rateLimited(w, wait, fmt.Sprintf("the token is over its %g counts per second", s.limits.leaves.rate))
	}
	return raw, nil
}

// projectRefusal is step 3 of an ingest request: 403 when raw names another project than
// the token's (existing or not), 404 when the token's project no longer exists, else nil.
func projectRefusal(raw *rawRequest, info tokenInfo) *httpError {
	if raw.project.ok && raw.project.v != info.project {
		return &httpError{status: http.StatusForbidden, body: apiv1.ErrorResponse{
			Error: apiv1.ErrForbidden, Message: "the token does not belong to this project",
			Errors: []apiv1.FieldError{{Field: "project", Message: "not the token's project"}},
		}}
	}
	if !info.projectExists {
		return &httpError{status: http.StatusNotFound, body: apiv1.ErrorResponse{
			Error: apiv1.ErrUnknownProject, Message: fmt.Sprintf("project %q does not exist (any more)", info.project),
			Errors: []apiv1.FieldError{{Field: "project", Message: "unknown project"}},
		}}
	}
	return nil
}

// answerWritten writes the 200 of a written request, sc's response, encoded into sc's
// buffer, and returns its outcome.
func (s *Server) answerWritten(w http.ResponseWriter, sc *ingestScratch) ingestOutcome {
	resp := &sc.resp
	out, err := resp.AppendJSON(sc.buf[:0])
	if err != nil { // not for a validated timestamp; encoding/json then fails the same way
		writeJSON(w, http.StatusOK, resp)
		return ingestOutcome{status: http.StatusOK, summary: resp.Summary}
	}
	sc.buf = append(out, '\n') // as json.Encoder ends a value
	writeHeader(w, http.StatusOK)
	_, _ = w.Write(sc.buf) // a write error means the client went away; there is nobody to tell
	return ingestOutcome{status: http.StatusOK, summary: resp.Summary}
}

func (s *Server) getScratch() *ingestScratch {
	if sc, ok := s.scratch.Get().(*ingestScratch); ok {
		return sc
	}
	return &ingestScratch{buf: make([]byte, 0, initialBuf)}
}

// putScratch keeps sc for a later request unless it grew too large. It drops the strings of
// this request first so that a pooled scratch does not keep its body alive.
func (s *Server) putScratch(sc *ingestScratch) {
	if cap(sc.buf) > maxPooledBuf || cap(sc.raw.counts) > maxPooledItems || cap(sc.resp.Items) > maxPooledItems ||
		cap(sc.sub.items) > maxPooledItems {
		return
	}
	counts, items, leaves := sc.raw.counts[:cap(sc.raw.counts)], sc.resp.Items[:cap(sc.resp.Items)], sc.sub.items[:cap(sc.sub.items)]
	clear(counts)
	clear(items)
	clear(leaves)
	*sc = ingestScratch{buf: sc.buf[:0], raw: rawRequest{counts: counts[:0]}, sub: submission{items: leaves[:0]},
		resp: apiv1.CountsResponse{Items: items[:0]}}
	s.scratch.Put(sc)
}

// readBody appends r to b until EOF as io.ReadAll does, growing b once to the announced
// length (when it is known and at most limit).
func readBody(b []byte, r io.Reader, length, limit int64) ([]byte, error) {
	if length > int64(cap(b)) && length <= limit {
		b = make([]byte, 0, length+1) // +1: the read that sees EOF needs room
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
	}
}

// write hands sub to the Sink and builds the 200 answer in resp (overwriting it, reusing the
// capacity of resp.Items), or returns the 503/500 when any outcome is not final.
func (s *Server) write(ctx context.Context, sub *submission, resp *apiv1.CountsResponse) *httpError {
	items := resp.Items
	if n := len(sub.items); items == nil || cap(items) < n {
		items = make([]apiv1.ItemResult, n)
	} else {
		items = items[:n]
		clear(items)
	}
	*resp = apiv1.CountsResponse{
		SubmissionID: sub.submissionID, Project: sub.project, Timestamp: sub.timestamp,
		Version: sub.version, Items: items,
	}
	// toSink are the items written; at[j] is the request index of toSink[j] when some items
	// were refused by checkLeaves (nil: toSink is sub.items).
	toSink, at := sub.items, []int(nil)
	if len(sub.mismatch) > 0 {
		toSink, at = make([]bulk.Item, 0, len(sub.items)), make([]int, 0, len(sub.items))
		for i, it := range sub.items {
			if msg, ok := sub.mismatch[i]; ok {
				resp.Items[i].Status, resp.Items[i].Error = apiv1.StatusRejected, msg
				resp.Summary.Rejected++
				continue
			}
			toSink, at = append(toSink, it), append(at, i)
		}
	}
	if len(toSink) > 0 {
		if s.cfg.Sink == nil {
			return s.internal("no sink configured", errors.New("api: nil Sink"))
		}
		sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
		results, err := s.cfg.Sink.Submit(sctx, toSink)
		cancel()
		switch {
		case err != nil && (errors.Is(err, bulk.ErrUnavailable) || errors.Is(err, bulk.ErrClosed) ||
			errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
			return s.unavailableErr("write", err)
		case err != nil:
			return s.internal("write", err)
		case len(results) != len(toSink):
			return s.internal("write", fmt.Errorf("sink returned %d results for %d items", len(results), len(toSink)))
		}
		for j, res := range results {
			i := j
			if at != nil {
				i = at[j]
			}
			it := &resp.Items[i]
			switch res.Outcome {
			case bulk.OutcomeApplied:
				it.Status = apiv1.StatusApplied
				resp.Summary.Applied++
			case bulk.OutcomeStale:
				it.Status = apiv1.StatusStale
				resp.Summary.Stale++
			case bulk.OutcomeRejected:
				it.Status = apiv1.StatusRejected
				it.Error = "the store refused the write"
				if res.Err != nil {
					it.Error = res.Err.Error()
				}
				resp.Summary.Rejected++
			default:
				// Not final: the whole request is resent (safe: applied items come back stale).
				return s.unavailableErr("write", fmt.Errorf("item %d outcome %s: %w", i, res.Outcome, res.Err))
			}
		}
	}
	for i, it := range sub.items {
		resp.Items[i].Index, resp.Items[i].ID, resp.Items[i].Type = i, it.ID, it.Type
	}
	if resp.Summary.Rejected > 0 {
		s.log.Warn("items rejected by the store", zap.String("project", sub.project),
			zap.String("submission_id", sub.submissionID), zap.Int("rejected", resp.Summary.Rejected))
	}
	return nil
}

func (s *Server) unauthorized(w http.ResponseWriter, msg string) {
	s.fail(w, s.unauthorizedErr(w, msg))
}

// unauthorizedErr sets the WWW-Authenticate header and returns the 401 to write.
func (s *Server) unauthorizedErr(w http.ResponseWriter, msg string) *httpError {
	w.Header().Set("WWW-Authenticate", `Bearer realm="rollup"`)
	return &httpError{status: http.StatusUnauthorized, body: apiv1.ErrorResponse{Error: apiv1.ErrUnauthorized, Message: msg}}
}

func (s *Server) unavailableErr(what string, err error) *httpError {
	s.log.Warn("store unavailable", zap.String("during", what), zap.Error(err))
	return unavailable()
}

// unavailable is the 503 of a submission the store could not take.
func unavailable() *httpError {
	return &httpError{status: http.StatusServiceUnavailable, body: apiv1.ErrorResponse{
		Error:      apiv1.ErrUnavailable,
		Message:    "the store is unavailable; part of this request may or may not have been written, resending the same request unchanged is safe",
		ResendSafe: true,
	}}
}

func (s *Server) internal(what string, err error) *httpError {
	s.log.Error("internal error", zap.String("during", what), zap.Error(err))
	return &httpError{status: http.StatusInternalServerError, body: apiv1.ErrorResponse{
		Error: apiv1.ErrInternal, Message: "internal error; resending the same request unchanged is safe", ResendSafe: true,
	}}
}

// fail writes e; a 503 gets a Retry-After: the Sink's suggestion during a store outage (see
// StoreGate), else jittered in [RetryAfter, 2×RetryAfter] seconds.
func (s *Server) fail(w http.ResponseWriter, e *httpError) {
	if e.status == http.StatusServiceUnavailable {
		secs := retryAfterSeconds(s.cfg.RetryAfter)
		if g, ok := s.cfg.Sink.(StoreGate); ok {
			if d := g.RetryAfter(); d > 0 {
				secs = max(1, int((d+time.Second/2)/time.Second)) // to the nearest second
			}
		}
		e.body.RetryAfterSeconds = secs
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if e.status < 500 {
		s.log.Debug("request rejected", zap.Int("status", e.status), zap.String("error", e.body.Error), zap.String("message", e.body.Message))
	}
	writeJSON(w, e.status, e.body)
}

// retryAfterSeconds draws a whole number of seconds uniformly in [base, 2×base], at least 1.
func retryAfterSeconds(base time.Duration) int {
	b := int(max(1, (base+time.Second-1)/time.Second))
	return b + rand.IntN(b+1)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeHeader(w, status)
	// A write error means the client went away; there is nobody to tell.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// The values of the headers of every JSON answer, shared by all answers so that setting them
// costs no allocation. Their capacity equals their length: Header.Add appends to a copy, and
// nothing in net/http writes into a header's value slice.
var (
	contentTypeJSON = []string{"application/json"}
	cacheNoStore    = []string{"no-store"}
)

// writeHeader sends the status and headers of a JSON answer. It sets them as Header.Set would
// (the keys are already canonical), without allocating their values.
func writeHeader(w http.ResponseWriter, status int) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Cache-Control"] = cacheNoStore
	w.WriteHeader(status)
}
