package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// BenchmarkReplay measures `rollup replay` (the whole command: connect, tree load, replay)
// against the embedded server over two windows of about 257,000 leaves (6 leaves in 7
// reported): 3 ticks of a 100,000-leaf tree (1 root, 20 groups, 1,000 servers, 100
// processes each) and 30 ticks of a 10,000-leaf tree (10 groups, 100 servers). It reports
// leaves/s. "fresh" replays the window without parent documents (every parent written),
// "rerun" replays it again (everything read and recomputed, nothing to write); "verify" runs
// `rollup verify` over the window. The command
// loads the tree once (about 0.3 s for 100,000 nodes), which the short window pays in full.
func BenchmarkReplay(b *testing.B) {
	for _, w := range []struct {
		name                      string
		groups, servers, procs, n int
	}{{"tree=100k/ticks=3", 20, 50, 100, 3}, {"tree=10k/ticks=30", 10, 10, 100, 30}} {
		b.Run(w.name, func(b *testing.B) { benchReplay(b, newOpsEnv(b, w.groups, w.servers, w.procs, w.n)) })
	}
}

func benchReplay(b *testing.B, e *opsEnv) {
	args := append([]string{"replay", "--progress", "none"}, e.window()...)
	var leaves int64
	replay := func(b *testing.B) {
		out, err := e.cmd(e.ctx, nil, args...)
		if err != nil || !strings.Contains(out, "replayed project ops") {
			b.Fatalf("replay: %v\n%s", err, out)
		}
	}
	verify := func(b *testing.B) {
		out, err := e.cmd(e.ctx, nil, append([]string{"verify"}, e.window()...)...)
		if err != nil || !strings.Contains(out, "no violations") {
			b.Fatalf("verify: %v\n%s", err, out)
		}
	}
	for _, tc := range []struct {
		name  string
		fresh bool
		run   func(*testing.B)
	}{{"fresh", true, replay}, {"rerun", false, replay}, {"verify", false, verify}} { // parents exist after fresh
		b.Run(tc.name, func(b *testing.B) {
			var took time.Duration
			for range b.N {
				if tc.fresh {
					if _, err := e.counts.DeleteMany(context.Background(), bson.D{{Key: store.FieldRollup, Value: true}}); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				tc.run(b)
				took += time.Since(start)
			}
			if leaves == 0 {
				n, err := e.counts.CountDocuments(context.Background(), bson.D{{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}})
				if err != nil {
					b.Fatal(err)
				}
				leaves = n
			}
			b.ReportMetric(float64(leaves)*float64(b.N)/took.Seconds(), "leaves/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
