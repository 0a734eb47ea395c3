package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
)

func sampleSummary() rollup.Summary {
	s := rollup.Summary{ID: "g03", Type: "group", Project: "demo", Start: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Rev: 3}
	s.Add(0, 10, 3, 3)
	s.Add(4, 7, 2, 3)
	s.Add(11, 9, 3, 3)
	return s
}

func summaryDoc(t testing.TB, tier Tier, s rollup.Summary) bson.D {
	t.Helper()
	upd := SummaryUpdate(tier, s, time.Date(2025, 3, 1, 13, 0, 1, 0, time.UTC))
	if len(upd) != 1 || upd[0].Key != "$set" {
		t.Fatalf("update is not one $set: %v", upd)
	}
	return upd[0].Value.(bson.D)
}

func TestSummaryRoundTrip(t *testing.T) {
	for _, tier := range []Tier{Tier1h, Tier1d} {
		s := sampleSummary()
		if tier == Tier1d {
			s.Start = BucketStart(Tier1d, s.Start)
			s.Add(287, 1, 0, 3)
		}
		got, err := DecodeSummary(tier, rawDoc(t, summaryDoc(t, tier, s)))
		if err != nil {
			t.Fatalf("%s: %v", tier, err)
		}
		if got != s {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", tier, got, s)
		}
	}
	// The stored shape of an hourly summary: int64 numbers, a DateTime start, 2 bytes of ticks.
	raw := rawDoc(t, summaryDoc(t, Tier1h, sampleSummary()))
	want := `{"id": "g03","type": "group","timestamp": {"$date":{"$numberLong":"1740830400000"}},"project": "demo",` +
		`"version": {"$numberLong":"3"},"count": {"$numberLong":"3"},"max": {"$numberLong":"10"},"min": {"$numberLong":"7"},` +
		`"sum": {"$numberLong":"26"},"last": {"$numberLong":"9"},"reported": {"$numberLong":"8"},"expected": {"$numberLong":"9"},` +
		`"full": {"$numberLong":"2"},"ticks": {"$binary":{"base64":"EQg=","subType":"00"}},"written_at": {"$date":{"$numberLong":"1740834001000"}}}`
	if raw.String() != want {
		t.Errorf("stored shape:\n got %s\nwant %s", raw.String(), want)
	}
}

func TestDecodeSummaryErrors(t *testing.T) {
	with := func(f string, v any) bson.D {
		d := summaryDoc(t, Tier1h, sampleSummary())
		for i := range d {
			if d[i].Key == f {
				d[i].Value = v
				return d
			}
		}
		return append(d, bson.E{Key: f, Value: v})
	}
	without := func(f string) bson.D {
		var out bson.D
		for _, e := range summaryDoc(t, Tier1h, sampleSummary()) {
			if e.Key != f {
				out = append(out, e)
			}
		}
		return out
	}
	cases := []struct {
		name  string
		tier  Tier
		doc   bson.D
		field string
	}{
		{"fraction", Tier1h, with(FieldMax, 1.5), FieldMax},
		{"string count", Tier1h, with(FieldSum, "26"), FieldSum},
		{"missing min", Tier1h, without(FieldMin), FieldMin},
		{"missing ticks", Tier1h, without(FieldTicks), FieldTicks},
		{"unknown field", Tier1h, with("online", int64(3)), "online"},
		{"count disagrees", Tier1h, with(FieldCount, int64(4)), FieldCount},
		{"full beyond count", Tier1h, with(FieldFull, int64(4)), FieldFull},
		{"ticks too long", Tier1h, with(FieldTicks, bson.Binary{Data: []byte{1, 2, 3}}), FieldTicks},
		{"tick beyond the hour", Tier1h, with(FieldTicks, bson.Binary{Data: []byte{0x11, 0x18}}), FieldTicks},
		{"ticks of a day in an hour", Tier1h, with(FieldTicks, bson.Binary{Data: make([]byte, 36)}), FieldTicks},
		{"not binary", Tier1h, with(FieldTicks, int64(3)), FieldTicks},
		{"not a bucket start", Tier1h, with(FieldTimestamp, time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC)), FieldTimestamp},
		{"hour start in the daily tier", Tier1d, summaryDoc(t, Tier1h, sampleSummary()), FieldTimestamp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeSummary(c.tier, rawDoc(t, c.doc))
			var ie *InvalidDocError
			if !errors.As(err, &ie) || ie.Field != c.field || ie.Doc != "summary" {
				t.Fatalf("got %v, want an invalid summary document naming %s", err, c.field)
			}
		})
	}
	if _, err := DecodeSummary(Tier5m, rawDoc(t, summaryDoc(t, Tier1h, sampleSummary()))); err == nil || !strings.Contains(err.Error(), "no summaries") {
		t.Fatalf("5m tier: %v", err)
	}
}

func TestBuckets(t *testing.T) {
	at := time.Date(2025, 3, 1, 23, 55, 0, 0, time.FixedZone("x", 3600))
	if got := BucketStart(Tier1h, at); !got.Equal(time.Date(2025, 3, 1, 22, 0, 0, 0, time.UTC)) {
		t.Errorf("hour start %v", got)
	}
	if got := BucketStart(Tier1d, at); !got.Equal(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("day start %v", got)
	}
	day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		tier Tier
		at   time.Time
		slot int
		ok   bool
	}{
		{Tier1d, day, 0, true},
		{Tier1d, day.Add(24*time.Hour - SummaryTick), 287, true},
		{Tier1d, day.Add(24 * time.Hour), 0, false},
		{Tier1d, day.Add(time.Minute), 0, false},
		{Tier1h, day.Add(55 * time.Minute), 11, true},
		{Tier1h, day.Add(-SummaryTick), 0, false},
	} {
		if slot, ok := BucketSlot(c.tier, day, c.at); slot != c.slot || ok != c.ok {
			t.Errorf("BucketSlot(%s, %v) = %d, %v; want %d, %v", c.tier, c.at, slot, ok, c.slot, c.ok)
		}
	}
	if BucketSlots(Tier1h) != 12 || BucketSlots(Tier1d) != 288 {
		t.Error("slots per bucket")
	}
}

func FuzzDecodeSummary(f *testing.F) {
	f.Add([]byte(rawDoc(f, summaryDoc(f, Tier1h, sampleSummary()))), false)
	f.Add([]byte(rawDoc(f, summaryDoc(f, Tier1d, rollup.Summary{ID: "r", Type: "project", Project: "p"}))), true)
	f.Fuzz(func(t *testing.T, doc []byte, daily bool) {
		tier := Tier1h
		if daily {
			tier = Tier1d
		}
		s, err := DecodeSummary(tier, doc)
		if err != nil {
			var ie *InvalidDocError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an *InvalidDocError", err)
			}
			return
		}
		// What decodes re-encodes to a document that decodes to the same summary.
		again, err := DecodeSummary(tier, rawDoc(t, summaryDoc(t, tier, s)))
		if err != nil || again != s {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, s)
		}
	})
}
