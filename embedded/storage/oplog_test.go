package storage

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestOplogRandomAgainstNaive appends 40,000 entries of random sizes (across many 1 MiB
// segments and 4,096-reference chunks) to an oplog that retains about 12,000 of them, and
// checks it against a plain slice trimmed by the same rule: the retained entries, a read from
// a random position, the range, views taken along the way (still what they were at the end),
// and that released chunks and segments are not kept.
func TestOplogRandomAgainstNaive(t *testing.T) {
	type ent struct {
		ts  uint64
		enc []byte
	}
	r := rand.New(rand.NewPCG(4, 2))
	const maxBytes = 12_000 * (200 + refOverhead)
	o := &oplog{maxBytes: maxBytes}
	var model []ent
	var modelBytes int64
	type snap struct {
		v    oplogView
		want []ent
	}
	var views []snap
	now := time.Unix(1_700_000_000, 0)
	for i := range 40_000 {
		enc := make([]byte, 1+r.IntN(400))
		for j := range enc {
			enc[j] = byte(r.Uint32())
		}
		ts := OpTime{T: uint32(1_700_000_000 + i/1000), I: uint32(i%1000 + 1)}
		o.append(enc, ts, now, now)
		model = append(model, ent{tsU64(ts), enc})
		modelBytes += int64(len(enc)) + refOverhead
		for len(model) > 1 && modelBytes > maxBytes {
			modelBytes -= int64(len(model[0].enc)) + refOverhead
			model = model[1:]
		}
		if r.IntN(500) == 0 {
			views = append(views, snap{o.view(), append([]ent(nil), model...)})
		}
		if r.IntN(200) != 0 {
			continue
		}
		durable := tsFromU64(model[len(model)-1].ts)
		from := r.IntN(len(model))
		after := OpTime{}
		if from > 0 {
			after = tsFromU64(model[from-1].ts)
		}
		got := o.afterRaw(after, durable, 0)
		if len(got) != len(model)-from {
			t.Fatalf("after %d appends: %d entries after position %d, want %d", i+1, len(got), from, len(model)-from)
		}
		for k, g := range got {
			if w := model[from+k]; tsU64(g.TS) != w.ts || !bytes.Equal(g.raw, w.enc) {
				t.Fatalf("after %d appends: entry %d differs", i+1, from+k)
			}
		}
		if first, last := o.rangeTS(durable); tsU64(first) != model[0].ts || tsU64(last) != model[len(model)-1].ts {
			t.Fatalf("after %d appends: range %v..%v", i+1, first, last)
		}
		if chunks := len(o.refs.chunks); chunks > len(model)/refChunk+2 {
			t.Fatalf("after %d appends: %d reference chunks kept for %d entries", i+1, chunks, len(model))
		}
		if len(o.segs) > int(modelBytes/segSize)+2 {
			t.Fatalf("after %d appends: %d segments kept for %d bytes", i+1, len(o.segs), modelBytes)
		}
	}
	if len(views) < 20 || len(model) < 10_000 {
		t.Fatalf("%d views, %d entries retained: the test did not exercise what it should", len(views), len(model))
	}
	for n, s := range views {
		if s.v.len() != len(s.want) {
			t.Fatalf("view %d: %d entries, want %d", n, s.v.len(), len(s.want))
		}
		for k, w := range s.want {
			if !bytes.Equal(s.v.raw(k), w.enc) {
				t.Fatalf("view %d: entry %d changed after later appends", n, k)
			}
		}
	}
}
