package bulk

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/store"
)

// naiveModel is the guarded upsert as bson.D, the form model encodes by hand.
func naiveModel(it Item, writtenAt time.Time) (filter, update bson.D) {
	filter = bson.D{
		{Key: store.FieldID, Value: it.ID},
		{Key: store.FieldType, Value: it.Type},
		{Key: store.FieldTimestamp, Value: it.Timestamp.UTC()},
		{Key: store.FieldProject, Value: it.Project},
		{Key: store.FieldVersion, Value: bson.D{{Key: "$lt", Value: it.Version}}},
		{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
	}
	update = bson.D{{Key: "$set", Value: bson.D{
		{Key: store.FieldOnline, Value: it.Online},
		{Key: store.FieldVersion, Value: it.Version},
		{Key: store.FieldProject, Value: it.Project},
		{Key: store.FieldSubmissionID, Value: it.SubmissionID},
		{Key: store.FieldWrittenAt, Value: writtenAt},
	}}}
	return filter, update
}

// TestModelEncoding cross-checks model's hand-encoded documents byte for byte against the
// driver's encoding of the bson.D form, for random items written into one shared buffer.
func TestModelEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	str := func(maxLen int) string {
		b := make([]byte, r.IntN(maxLen+1))
		for i := range b {
			b[i] = "abcXYZ019_-:é"[r.IntN(13)]
		}
		return string(b)
	}
	edge := []int64{0, 1, -1, math.MaxInt32, math.MaxInt32 + 1, math.MinInt64, math.MaxInt64}
	num := func() int64 {
		if r.IntN(3) == 0 {
			return edge[r.IntN(len(edge))]
		}
		return r.Int64()
	}
	var buf []byte
	type encoded struct{ filter, update bson.Raw }
	var got []encoded
	var items []Item
	var written []time.Time
	for range 2000 {
		it := Item{
			Key:     Key{ID: str(128), Type: str(16), Timestamp: time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).In(time.FixedZone("x", 3600))},
			Project: str(64), Online: num(), Version: num(), SubmissionID: str(128),
		}
		at := time.Unix(r.Int64N(1<<34), r.Int64N(1e9))
		m, next := model(buf, it, at)
		if len(next)-len(buf) > modelSize(it) {
			t.Fatalf("model appended %d bytes, modelSize says at most %d", len(next)-len(buf), modelSize(it))
		}
		buf = next
		u := m.(*mongo.UpdateOneModel)
		if u.Upsert == nil || !*u.Upsert {
			t.Fatalf("model is not an upsert")
		}
		got = append(got, encoded{u.Filter.(bson.Raw), u.Update.(bson.Raw)})
		items = append(items, it)
		written = append(written, at)
	}
	// Checked after every append: later appends must not have changed earlier documents.
	for i, g := range got {
		f, u := naiveModel(items[i], written[i])
		for _, c := range []struct {
			name string
			got  bson.Raw
			want any
		}{{"filter", g.filter, f}, {"update", g.update, u}} {
			want, err := bson.Marshal(c.want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.got, want) {
				t.Fatalf("item %d %s:\n got %s\nwant %s", i, c.name, c.got, bson.Raw(want))
			}
		}
	}
}

func BenchmarkModel(b *testing.B) {
	items := make([]Item, 1000)
	for i := range items {
		items[i] = item(fmt.Sprintf("process-%06d", i), int64(i), 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		buf := make([]byte, 0, len(items)*modelSize(items[0]))
		for _, it := range items {
			_, buf = model(buf, it, tick0)
		}
	}
}
