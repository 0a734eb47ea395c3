package api

import (
	"maps"
	"sync"

	"github.com/gameops/rollup/api/apiv1"
)

// Stats are the ingest counters (POST /v1/counts) and the read API's latencies since
// NewServer, for the metrics layer.
type Stats struct {
	// Requests counts answered ingest requests by HTTP status.
	Requests map[int]int64
	// Rejections counts ingest requests answered with an error, by the answer's error code
	// (apiv1.ErrorResponse.Error: "invalid_item", "unauthorized", "unavailable", ...).
	Rejections map[string]int64
	// Items counts the items of 200 answers by status ("applied", "stale", "rejected").
	Items map[string]int64
	// Reads are the read API's latency histograms by route and status (a zero one for every
	// route and ReadCodes status from the start).
	Reads []ReadStat
}

// ingestStats are the live Stats.
type ingestStats struct {
	mu         sync.Mutex
	requests   map[int]int64
	rejections map[string]int64
	items      [3]int64 // applied, stale, rejected
}

// newIngestStats starts every counter of a known label at 0 (IngestStatuses, IngestErrorCodes),
// so that /metrics has them before the first such answer and rate() sees it.
func newIngestStats() *ingestStats {
	s := &ingestStats{requests: map[int]int64{}, rejections: map[string]int64{}}
	for _, c := range IngestStatuses() {
		s.requests[c] = 0
	}
	for _, c := range IngestErrorCodes() {
		s.rejections[c] = 0
	}
	return s
}

// IngestErrorCodes returns the error codes POST /v1/counts answers with (the reason label of
// the rejection counter).
func IngestErrorCodes() []string {
	return []string{apiv1.ErrMalformedJSON, apiv1.ErrMalformedBody, apiv1.ErrInvalidRequest, apiv1.ErrInvalidItem,
		apiv1.ErrUnauthorized, apiv1.ErrForbidden, apiv1.ErrUnknownProject, apiv1.ErrRequestTimeout, apiv1.ErrBodyTooLarge,
		apiv1.ErrTooManyItems, apiv1.ErrUnsupportedMediaType, apiv1.ErrOutOfWindow, apiv1.ErrUnavailable, apiv1.ErrInternal}
}

// record counts one answer: its status, and the error code of a failure or the summary of a
// success.
func (s *ingestStats) record(status int, code string, sum apiv1.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[status]++
	if code != "" {
		s.rejections[code]++
	}
	s.items[0] += int64(sum.Applied)
	s.items[1] += int64(sum.Stale)
	s.items[2] += int64(sum.Rejected)
}

func (s *ingestStats) snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Requests:   maps.Clone(s.requests),
		Rejections: maps.Clone(s.rejections),
		Items: map[string]int64{
			string(apiv1.StatusApplied): s.items[0], string(apiv1.StatusStale): s.items[1], string(apiv1.StatusRejected): s.items[2],
		},
	}
}

// Stats returns the ingest counters and the read latencies since NewServer.
func (s *Server) Stats() Stats {
	st := s.stats.snapshot()
	st.Reads = s.reads.snapshot()
	return st
}
