package wire

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// bulkUpdate is an unordered update of n upserts as the driver sends it for rollup's bulks.
func bulkUpdate(b *testing.B, n int) []byte {
	m := Msg{Body: mustDoc(b, bson.D{{Key: "update", Value: "counts"}, {Key: "ordered", Value: false}, {Key: "$db", Value: "rollup"}})}
	seq := Sequence{Identifier: "updates"}
	for i := range n {
		seq.Docs = append(seq.Docs, mustDoc(b, bson.D{
			{Key: "q", Value: bson.D{{Key: "id", Value: "server-0001"}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: int64(1700000000 + i)}}},
			{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "online", Value: int32(1)}}}}},
			{Key: "upsert", Value: true},
		}))
	}
	m.Sequences = []Sequence{seq}
	return m.Append(nil, 1, 0)
}

func BenchmarkParseMsg1000(b *testing.B) {
	raw := bulkUpdate(b, 1000)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMsg(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMergedBody1000(b *testing.B) {
	m, err := ParseMsg(bulkUpdate(b, 1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = m.MergedBody()
	}
}
