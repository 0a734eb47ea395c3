package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Bounds of the read API (documented in docs/openapi.yaml).
const (
	// MaxSeriesPoints bounds the points of one series answer.
	MaxSeriesPoints = 10_000
	// MaxSeriesWindow bounds the window of one series answer at any step: two years (a
	// leap day included), at 1d.
	MaxSeriesWindow = 731 * 24 * time.Hour
	// MaxTicksWindow bounds the ticks one GET .../ticks may cover (at the default 5m tick: 34.7 days).
	MaxTicksWindow = 10_000
	// MaxTopN bounds the n of GET .../top.
	MaxTopN = 1000
	// DefaultTopN is the n of GET .../top without one.
	DefaultTopN = 10
	// readTimeout bounds the store work of one read request.
	readTimeout = 30 * time.Second
)

// reader is what the read API reads from: the counts collection and the tree versions.
type reader struct {
	db    *mongo.Database // nil: reads answer 500
	trees *treedb.Store
	tick  time.Duration
	now   func() time.Time
	// skew is how far ahead of now ingest accepts a tick (Config.FutureSkew): a later tick
	// cannot have a count yet.
	skew time.Duration
}

// routeReads registers the read API on s.mux, and the JSON 404/405 of every other path and
// method (routeFallback).
func (s *Server) routeReads(cfg Config) {
	s.read = reader{db: cfg.DB, trees: cfg.TreeStore, tick: cfg.Tick, now: cfg.Now, skew: cfg.FutureSkew}
	if s.read.trees == nil && cfg.DB != nil {
		s.read.trees = treedb.New(cfg.DB)
	}
	p := "GET " + apiv1.ProjectsPath + "/{project}"
	s.mux.HandleFunc("GET "+apiv1.ProjectsPath, s.timed(routeProjects, s.readHandler(false, s.serveProjects)))
	s.mux.HandleFunc(p+apiv1.TreePath, s.timed(routeTree, s.readHandler(true, s.serveTree)))
	s.mux.HandleFunc(p+apiv1.SeriesPath, s.timed(routeSeries, s.readHandler(true, s.serveSeries)))
	s.mux.HandleFunc(p+apiv1.TopPath, s.timed(routeTop, s.readHandler(true, s.serveTop)))
	s.mux.HandleFunc(p+apiv1.TicksPath, s.timed(routeTicks, s.readHandler(true, s.serveTicks)))
	s.mux.HandleFunc(p+apiv1.DiffPath, s.timed(routeDiff, s.readHandler(true, s.serveDiff)))
	s.mux.HandleFunc(p+apiv1.AnnotationsPath, s.timed(routeAnnotations, s.readHandler(true, s.serveAnnotations)))
	s.routeFallback()
}

// readFunc answers one read request of a token; project is the authorized project. An error
// is an *httpError to answer as is, or a store failure (503).
type readFunc func(ctx context.Context, info tokenInfo, project string, q url.Values) (any, error)

// readHandler authenticates a read request (any scope may read), checks that the path's
// project is the token's (403 otherwise, existing or not; 404 when the token's project was
// deleted), bounds its time and answers fn's result as JSON.
func (s *Server) readHandler(hasProject bool, fn readFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// A read takes no body; one sent anyway is drained by net/http after the answer,
		// within the ingest body's read deadline.
		boundBody(r, http.NewResponseController(w), s.cfg.BodyReadTimeout)
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.unauthorized(w, "missing or malformed Authorization header; send \"Authorization: Bearer <token>\"")
			return
		}
		// Bounded without a deadline: the driver retries a failing read once, not for as
		// long as a deadline allows.
		ctx, cancel := retry.Bound(r.Context(), readTimeout)
		defer cancel()
		now := s.cfg.Now()
		info, found, err := s.auth.lookupByToken(ctx, token, now)
		if err != nil {
			s.fail(w, s.readUnavailable("token lookup", err))
			return
		}
		if !found {
			s.unauthorized(w, "unknown token")
			return
		}
		if herr := s.admit(ctx, w, info, now); herr != nil {
			s.fail(w, herr)
			return
		}
		project := ""
		if hasProject {
			project = r.PathValue("project")
			if project != info.project {
				s.fail(w, &httpError{status: http.StatusForbidden, body: apiv1.ErrorResponse{
					Error: apiv1.ErrForbidden, Message: "the token does not belong to this project",
					Errors: []apiv1.FieldError{{Field: "project", Message: "not the token's project"}},
				}})
				return
			}
			if !info.projectExists {
				s.fail(w, &httpError{status: http.StatusNotFound, body: apiv1.ErrorResponse{
					Error: apiv1.ErrUnknownProject, Message: fmt.Sprintf("project %q does not exist (any more)", project),
					Errors: []apiv1.FieldError{{Field: "project", Message: "unknown project"}},
				}})
				return
			}
		}
		if s.read.db == nil {
			s.fail(w, s.internal("read", errNoDB))
			return
		}
		out, err := fn(ctx, info, project, r.URL.Query())
		var herr *httpError
		switch {
		case errors.As(err, &herr):
			s.fail(w, herr)
		case errors.As(err, new(*store.InvalidDocError)):
			s.fail(w, s.internal(r.URL.Path, err))
		case err != nil:
			s.fail(w, s.readUnavailable(r.URL.Path, err))
		default:
			writeJSON(w, http.StatusOK, out)
		}
	}
}

// readUnavailable is the 503 of a read that failed in the store.
func (s *Server) readUnavailable(what string, err error) *httpError {
	s.log.Warn("read failed", zap.String("during", what), zap.Error(err))
	return &httpError{status: http.StatusServiceUnavailable, body: apiv1.ErrorResponse{
		Error: apiv1.ErrUnavailable, Message: "the store is unavailable or too slow; retry after Retry-After", ResendSafe: true,
	}}
}

func (s *Server) serveProjects(_ context.Context, info tokenInfo, _ string, q url.Values) (any, error) {
	if err := checkParams(q); err != nil {
		return nil, err
	}
	out := apiv1.ProjectsResponse{Projects: []apiv1.ProjectInfo{}}
	if info.projectExists {
		out.Projects = append(out.Projects, apiv1.ProjectInfo{Name: info.project})
	}
	return out, nil
}

// badParam is the 400 of an invalid query parameter.
func badParam(name, format string, args ...any) *httpError {
	msg := fmt.Sprintf(format, args...)
	return &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
		Error: apiv1.ErrInvalidParameter, Message: name + ": " + msg,
		Errors: []apiv1.FieldError{{Field: name, Message: msg}},
	}}
}

// notFound is a 404 with code.
func notFound(code, field, format string, args ...any) *httpError {
	msg := fmt.Sprintf(format, args...)
	e := &httpError{status: http.StatusNotFound, body: apiv1.ErrorResponse{Error: code, Message: msg}}
	if field != "" {
		e.body.Errors = []apiv1.FieldError{{Field: field, Message: msg}}
	}
	return e
}

// checkParams rejects parameters not in allowed and repeated ones, so a typo is an error
// rather than a silently ignored parameter.
func checkParams(q url.Values, allowed ...string) error {
	for k, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			if k == "" {
				k = "(empty name)"
			}
			if len(allowed) == 0 {
				return badParam(k, "unknown parameter; this endpoint takes none")
			}
			return badParam(k, "unknown parameter; this endpoint takes %s", strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return badParam(k, "given %d times", len(vs))
		}
	}
	return nil
}

// Bounds of accepted times: far outside them a tick is surely a mistake, and durations
// between them never overflow.
var (
	minReadTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxReadTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// timeParam parses the RFC 3339 parameter name; ok is false when it is absent.
func timeParam(q url.Values, name string) (t time.Time, ok bool, err error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, perr := parseRFC3339(v)
	if perr != nil {
		return time.Time{}, false, badParam(name, "%q is not an RFC 3339 time such as 2024-05-01T10:05:00Z", v)
	}
	if t.Before(minReadTime) || !t.Before(maxReadTime) {
		return time.Time{}, false, badParam(name, "%s is outside 1970–2199", v)
	}
	return t.UTC(), true, nil
}

// parseRFC3339 parses an RFC 3339 date-time. RFC 3339 allows a lowercase "t" and "z"
// (section 5.6), which time.Parse refuses; it does not allow the comma time.Parse takes for
// a decimal point.
func parseRFC3339(v string) (time.Time, error) {
	if strings.ContainsRune(v, ',') {
		return time.Time{}, errors.New("a comma is not an RFC 3339 decimal point")
	}
	if len(v) > 10 && v[10] == 't' {
		v = v[:10] + "T" + v[11:]
	}
	if strings.HasSuffix(v, "z") {
		v = v[:len(v)-1] + "Z"
	}
	return time.Parse(time.RFC3339Nano, v)
}

// nodeParam returns the required parameter node.
func nodeParam(q url.Values) (string, error) {
	node := q.Get("node")
	if node == "" {
		return "", badParam("node", "required: the id of a node of the project's tree")
	}
	if err := tree.ValidateID(node); err != nil {
		return "", badParam("node", "%s", err.Error())
	}
	return node, nil
}

// window returns [from, to) of the from and to parameters, from aligned down and to aligned
// up to align. Without to it is the end of the current step; without from, to − def.
func (rd *reader) window(q url.Values, align, def time.Duration) (from, to time.Time, err error) {
	from, hasFrom, err := timeParam(q, "from")
	if err != nil {
		return from, to, err
	}
	to, hasTo, err := timeParam(q, "to")
	if err != nil {
		return from, to, err
	}
	if !hasTo {
		to = tree.AlignTick(rd.now(), align).Add(align)
	} else if a := tree.AlignTick(to, align); !a.Equal(to) {
		to = a.Add(align)
	}
	if !hasFrom {
		from = to.Add(-def)
	}
	from = tree.AlignTick(from, align)
	if !from.Before(to) {
		return from, to, badParam("from", "the window [from, to) is empty: from %s is not before to %s",
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return from, to, nil
}

// intParam parses the parameter name as an integer in [lo, hi], def when absent. Only the
// canonical decimal form is accepted (no sign, no leading zero), as for other parameters a
// value has one spelling.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || strconv.Itoa(n) != v || n < lo || n > hi {
		if len(v) > 32 {
			v = v[:32] + "…"
		}
		return 0, badParam(name, "%q is not a whole number in [%d, %d] written with digits only (no sign, no leading zero)", v, lo, hi)
	}
	return n, nil
}

// tickParam returns the tick containing the parameter tick, or ok false when it is absent.
// A tick later than ingest accepts now (the current tick, or the next within the clock skew)
// is a 400: no count can exist for it yet, and an answer of zeros would read as an outage.
func (rd *reader) tickParam(q url.Values) (time.Time, bool, error) {
	t, ok, err := timeParam(q, "tick")
	if err != nil || !ok {
		return t, ok, err
	}
	t = tree.AlignTick(t, rd.tick)
	now := rd.now()
	if last := tree.AlignTick(now.Add(rd.skew), rd.tick); t.After(last) {
		return t, false, badParam("tick", "%s is in the future: the server's current tick is %s, and no count can exist after %s yet",
			q.Get("tick"), tree.AlignTick(now, rd.tick).Format(time.RFC3339), last.Format(time.RFC3339))
	}
	return t, true, nil
}

// atTick returns the tick of the tick parameter, or by default the latest tick that has a
// root document.
func (rd *reader) atTick(ctx context.Context, project string, q url.Values) (time.Time, error) {
	t, ok, err := rd.tickParam(q)
	if err != nil || ok {
		return t, err
	}
	t, ok, err = rd.latestRootTick(ctx, project)
	if err != nil {
		return t, err
	}
	if !ok {
		return t, notFound(apiv1.ErrNoData, "tick", "project %q has no rolled-up tick yet (no root document); pass tick= to see a tick anyway", project)
	}
	return t, nil
}

// treeAt returns the span of the tick at t (404 no_data when no tree version is effective).
func (rd *reader) treeAt(ctx context.Context, project string, t time.Time) (span, error) {
	spans, err := rd.spans(ctx, project, t, t.Add(rd.tick))
	if err != nil {
		return span{}, err
	}
	if spans[0].tree == nil {
		return span{}, notFound(apiv1.ErrNoData, "tick", "project %q has no tree version effective at %s; import one with rollup tree import",
			project, t.Format(time.RFC3339))
	}
	return spans[0], nil
}
