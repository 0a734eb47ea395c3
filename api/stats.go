package api

import (
	"maps"
	"sync"

	"github.com/gameops/rollup/api/apiv1"
)

// Stats are the ingest counters (POST /v1/counts) since NewServer, for the metrics layer.
type Stats struct {
	// Requests counts answered ingest requests by HTTP status.
	Requests map[int]int64
	// Rejections counts ingest requests answered with an error, by the answer's error code
	// (apiv1.ErrorResponse.Error: "invalid_item", "unauthorized", "unavailable", ...).
	Rejections map[string]int64
	// Items counts the items of 200 answers by status ("applied", "stale", "rejected").
	Items map[string]int64
}

// ingestStats are the live Stats.
type ingestStats struct {
	mu         sync.Mutex
	requests   map[int]int64
	rejections map[string]int64
	items      [3]int64 // applied, stale, rejected
}

func newIngestStats() *ingestStats {
	return &ingestStats{requests: map[int]int64{}, rejections: map[string]int64{}}
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

// Stats returns the ingest counters since NewServer.
func (s *Server) Stats() Stats { return s.stats.snapshot() }
