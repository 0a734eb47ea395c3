package watcher

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func rawDoc(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTokenTime(t *testing.T) {
	tests := []struct {
		name  string
		token bson.D
		want  bson.Timestamp
	}{
		{"event token", bson.D{{Key: "_data", Value: "826553F1A0000000070100"}}, bson.Timestamp{T: 0x6553F1A0, I: 7}},
		{"real server token with more key-string", bson.D{{Key: "_data", Value: "8265A1B2C3000000012B022C0100296E5A1004ABCDEF"}}, bson.Timestamp{T: 0x65A1B2C3, I: 1}},
		{"too short", bson.D{{Key: "_data", Value: "8265"}}, bson.Timestamp{}},
		{"not a timestamp key", bson.D{{Key: "_data", Value: "3C6553F1A0000000070100"}}, bson.Timestamp{}},
		{"not hex", bson.D{{Key: "_data", Value: "82zzzzzzzzzzzzzzzzzz"}}, bson.Timestamp{}},
		{"no _data", bson.D{{Key: "x", Value: 1}}, bson.Timestamp{}},
		{"_data not a string", bson.D{{Key: "_data", Value: 1}}, bson.Timestamp{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokenTime(rawDoc(t, tc.token)); got != tc.want {
				t.Fatalf("tokenTime = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCheckpointSince(t *testing.T) {
	saved := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := (checkpoint{ClusterTime: bson.Timestamp{T: 100}, SavedAt: saved}).since(); !got.Equal(time.Unix(100, 0)) {
		t.Fatalf("since = %v, want the cluster time", got)
	}
	if got := (checkpoint{SavedAt: saved}).since(); !got.Equal(saved) {
		t.Fatalf("since = %v, want the save time", got)
	}
}

// FuzzTokenTime: any token bytes never panic, and a decoded time comes from a _data string
// starting with the key-string Timestamp type byte.
func FuzzTokenTime(f *testing.F) {
	f.Add([]byte(rawDoc(f, bson.D{{Key: "_data", Value: "826553F1A0000000070100"}})))
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if ts := tokenTime(bson.Raw(b)); ts != (bson.Timestamp{}) {
			data, _ := bson.Raw(b).Lookup("_data").StringValueOK()
			if !strings.HasPrefix(data, "82") {
				t.Fatalf("decoded %+v from _data %q", ts, data)
			}
		}
		decodeEvent(bson.Raw(b))
	})
}
