package api

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gameops/rollup/internal/hist"
)

// Route labels of the read API's metrics, one per endpoint.
const (
	routeProjects = "projects"
	routeTree     = "tree"
	routeSeries   = "series"
	routeTop      = "top"
	routeTicks    = "ticks"
	routeDiff     = "diff"
	// routeAnnotations is GET .../annotations.
	routeAnnotations = "annotations"
)

// ReadRoutes returns the route labels of ReadStat, one per read endpoint.
func ReadRoutes() []string {
	return []string{routeProjects, routeTree, routeSeries, routeTop, routeTicks, routeDiff, routeAnnotations}
}

// ReadCodes returns the HTTP statuses a read is answered with: Stats.Reads has a (zero)
// histogram for each of them on every route from the start, so rate() sees the first one.
func ReadCodes() []int {
	return []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusInternalServerError, http.StatusServiceUnavailable}
}

// IngestStatuses returns the HTTP statuses POST /v1/counts answers: Stats.Requests has each
// of them from the start, at 0 until the first.
func IngestStatuses() []int {
	return []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
		http.StatusUnprocessableEntity, http.StatusInternalServerError, http.StatusServiceUnavailable}
}

// ReadLatencyBounds are the upper bounds (seconds) of the read latency histograms.
func ReadLatencyBounds() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// ReadStat is the latency histogram of the read requests of one route answered with one
// status.
type ReadStat struct {
	// Route is the endpoint (ReadRoutes).
	Route string
	// Code is the HTTP status of the answer.
	Code int
	// Latency is the time from the request to the answer written, in seconds.
	Latency hist.Snapshot
}

// readStats are the live latency histograms by route and status.
type readStats struct {
	mu sync.Mutex
	by map[readKey]*hist.Histogram
}

type readKey struct {
	route string
	code  int
}

func newReadStats() *readStats {
	s := &readStats{by: map[readKey]*hist.Histogram{}}
	for _, r := range ReadRoutes() {
		for _, c := range ReadCodes() {
			s.by[readKey{r, c}] = hist.New(ReadLatencyBounds()...)
		}
	}
	return s
}

func (s *readStats) observe(route string, code int, d time.Duration) {
	k := readKey{route, code}
	s.mu.Lock()
	h := s.by[k]
	if h == nil {
		h = hist.New(ReadLatencyBounds()...)
		s.by[k] = h
	}
	s.mu.Unlock()
	h.Observe(d.Seconds())
}

// snapshot returns every histogram, by route then code.
func (s *readStats) snapshot() []ReadStat {
	s.mu.Lock()
	out := make([]ReadStat, 0, len(s.by))
	for k, h := range s.by {
		out = append(out, ReadStat{Route: k.route, Code: k.code, Latency: h.Snapshot()})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ReadStat) int {
		if a.Route != b.Route {
			if a.Route < b.Route {
				return -1
			}
			return 1
		}
		return a.Code - b.Code
	})
	return out
}

// statusWriter records the status an http.ResponseWriter was answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// timed wraps a read handler of route: its latency goes to the read stats by status.
func (s *Server) timed(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		s.reads.observe(route, code, time.Since(start))
	}
}
