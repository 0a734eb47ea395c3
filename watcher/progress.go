package watcher

import (
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/internal/hist"
)

// Progress is where the watcher's streams are and how long recomputing takes, for the
// metrics layer (Stats has the counters).
type Progress struct {
	// Recompute is the distribution of the seconds a burst of leaves took to recompute
	// (every ancestor written); its Count is the number of bursts.
	Recompute hist.Snapshot
	// Tiers is the distribution of the seconds one write of the waiting hourly and daily
	// summaries took; its Count is the number of such writes.
	Tiers hist.Snapshot
	// Streams has one entry per checkpoint name (one per partition), sorted by name.
	Streams []StreamProgress
}

// StreamProgress is the position of one change stream.
type StreamProgress struct {
	// Checkpoint is the checkpoint's _id (Options.Name, or the partition's).
	Checkpoint string
	// Position is the cluster time (whole seconds) of the resume token after the last
	// processed batch: every event before it has its rollups and their summaries written. It advances on an
	// idle stream too (the postBatchResumeToken; a replica set's no-op writer moves it every
	// 10 s), so now − Position is the watcher's lag. Zero before the first batch.
	Position time.Time
	// CheckpointSavedAt is when the last checkpoint was saved by this process (zero before).
	CheckpointSavedAt time.Time
	// CheckpointPosition is the cluster time of the last saved checkpoint (zero before, or
	// when its token is not decodable).
	CheckpointPosition time.Time
}

// RecomputeBounds returns the upper bounds, in seconds, of Progress.Recompute's buckets.
func RecomputeBounds() []float64 {
	return []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// progress is the live Progress; its zero value is ready to use (it lives in counters).
type progress struct {
	once      sync.Once
	recompute *hist.Histogram
	tierHist  *hist.Histogram
	mu        sync.Mutex
	streams   map[string]*StreamProgress
}

func (p *progress) init() {
	p.once.Do(func() {
		p.recompute = hist.New(RecomputeBounds()...)
		p.tierHist = hist.New(RecomputeBounds()...)
		p.streams = map[string]*StreamProgress{}
	})
}

// burst records the time a burst took to recompute.
func (p *progress) burst(took time.Duration) {
	p.init()
	p.recompute.Observe(took.Seconds())
}

// tiers records the time one write of the waiting summaries took.
func (p *progress) tiers(took time.Duration) {
	p.init()
	p.tierHist.Observe(took.Seconds())
}

// stream returns the entry of a checkpoint name; p.mu must be held.
func (p *progress) stream(name string) *StreamProgress {
	s := p.streams[name]
	if s == nil {
		s = &StreamProgress{Checkpoint: name}
		p.streams[name] = s
	}
	return s
}

// position records the token after the last processed batch of a stream.
func (p *progress) position(name string, token bson.Raw) {
	t := tokenTime(token)
	if t.T == 0 {
		return
	}
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stream(name).Position = time.Unix(int64(t.T), 0).UTC()
}

// checkpoint records a saved checkpoint of a stream.
func (p *progress) checkpoint(name string, cp checkpoint) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stream(name)
	s.CheckpointSavedAt = cp.SavedAt
	if cp.ClusterTime.T != 0 {
		s.CheckpointPosition = time.Unix(int64(cp.ClusterTime.T), 0).UTC()
	}
}

func (p *progress) snapshot() Progress {
	p.init()
	out := Progress{Recompute: p.recompute.Snapshot(), Tiers: p.tierHist.Snapshot()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.streams {
		out.Streams = append(out.Streams, *s)
	}
	slices.SortFunc(out.Streams, func(a, b StreamProgress) int { return strings.Compare(a.Checkpoint, b.Checkpoint) })
	return out
}

// Progress returns the streams' positions and the recompute latencies since New.
func (w *Watcher) Progress() Progress { return w.stats.prog.snapshot() }
