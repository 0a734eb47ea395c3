package store

import (
	"fmt"
	"math/bits"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/tree"
)

// Field names of the summary documents (rollups_1h, rollups_1d) beyond the counts
// collection's id, type, timestamp (the bucket's start), project, version (the revision),
// reported, expected (each summed over the ticks summarized), written_at and term.
const (
	// FieldMax, FieldMin and FieldLastOnline are the greatest, least and latest online total
	// of the ticks summarized; FieldSum is their sum.
	FieldMax        = "max"
	FieldMin        = "min"
	FieldSum        = "sum"
	FieldLastOnline = "last"
	// FieldCount is the number of ticks summarized (the ticks of the bucket with a 5-minute
	// document): the mean is sum / count.
	FieldCount = "count"
	// FieldFull is the number of those ticks whose document has reported == expected.
	FieldFull = "full"
	// FieldTicks is the set of the bucket's ticks summarized: binary, bit i (byte i/8, bit i%8)
	// for the tick at the bucket's start plus i ticks.
	FieldTicks = "ticks"
)

// SummaryTick is the tick the summaries are made of (tree.DefaultTick).
const SummaryTick = tree.DefaultTick

// SummaryCollection returns the collection of tier t's summaries (1h or 1d).
func SummaryCollection(t Tier) (string, bool) {
	switch t {
	case Tier1h:
		return HourlyCollection, true
	case Tier1d:
		return DailyCollection, true
	}
	return "", false
}

// BucketSpan is the time one bucket of tier t covers: a tick for 5m, an hour for 1h, a UTC
// day for 1d (0 for leaves).
func BucketSpan(t Tier) time.Duration {
	switch t {
	case Tier5m:
		return SummaryTick
	case Tier1h:
		return time.Hour
	case Tier1d:
		return 24 * time.Hour
	}
	return 0
}

// BucketStart is the start of tier t's bucket that holds ts (UTC; days start at midnight UTC).
func BucketStart(t Tier, ts time.Time) time.Time {
	return ts.UTC().Truncate(BucketSpan(t))
}

// BucketSlots is the number of ticks in one bucket of tier t (12 for 1h, 288 for 1d).
func BucketSlots(t Tier) int { return int(BucketSpan(t) / SummaryTick) }

// BucketSlot returns the slot of tick ts in the bucket of tier t that starts at start; ok is
// false when ts is not a tick start or not in that bucket.
func BucketSlot(t Tier, start, ts time.Time) (int, bool) {
	off := ts.Sub(start)
	if off < 0 || off >= BucketSpan(t) || off%SummaryTick != 0 {
		return 0, false
	}
	return int(off / SummaryTick), true
}

// SummaryUpdate returns the update document that stores s absolutely in tier t's collection:
// {$set: {every field}} with version = s.Rev. It has no $inc, so applying it twice is
// harmless; the writer guards it with a filter on the previous Rev.
func SummaryUpdate(t Tier, s rollup.Summary, writtenAt time.Time) bson.D {
	return bson.D{{Key: "$set", Value: SummaryFields(t, s, writtenAt)}}
}

// SummaryFields is the document SummaryUpdate sets: a whole summary document without _id.
func SummaryFields(t Tier, s rollup.Summary, writtenAt time.Time) bson.D {
	return bson.D{
		{Key: FieldID, Value: s.ID},
		{Key: FieldType, Value: s.Type},
		{Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(s.Start)},
		{Key: FieldProject, Value: s.Project},
		{Key: FieldVersion, Value: s.Rev},
		{Key: FieldCount, Value: s.Count()},
		{Key: FieldMax, Value: s.Max},
		{Key: FieldMin, Value: s.Min},
		{Key: FieldSum, Value: s.Sum},
		{Key: FieldLastOnline, Value: s.Last},
		{Key: FieldReported, Value: s.Reported},
		{Key: FieldExpected, Value: s.Expected},
		{Key: FieldFull, Value: s.Full},
		{Key: FieldTicks, Value: bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: encodeTicks(s.Ticks, BucketSlots(t))}},
		{Key: FieldWrittenAt, Value: bson.NewDateTimeFromTime(writtenAt)},
	}
}

// encodeTicks is the set's first n slots, little-endian, one bit per slot.
func encodeTicks(s rollup.TickSet, n int) []byte {
	out := make([]byte, (n+7)/8)
	for i := range n {
		if s.Has(i) {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

const docSummary = "summary"

// summaryFields are the fields every summary document has.
var summaryFields = [...]string{
	FieldID, FieldType, FieldTimestamp, FieldProject, FieldVersion, FieldCount, FieldMax, FieldMin,
	FieldSum, FieldLastOnline, FieldReported, FieldExpected, FieldFull, FieldTicks,
}

// DecodeSummary decodes a summary document of tier t, as SummaryUpdate writes it. It is
// strict, like DecodeParent: every field present with its type (counts as Count reads them),
// ticks of the tier's length, count equal to the ticks set, the timestamp at a bucket start;
// _id, written_at and term are ignored; anything else is an *InvalidDocError naming the
// field.
func DecodeSummary(t Tier, doc bson.Raw) (rollup.Summary, error) {
	var s rollup.Summary
	elems, err := doc.Elements()
	if err != nil {
		return s, &InvalidDocError{Doc: docSummary, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	slots := BucketSlots(t)
	if slots <= 1 || slots > rollup.MaxSlots {
		return s, fmt.Errorf("decode summary: tier %q has no summaries", t)
	}
	var count int64
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		if seen[key] {
			return rollup.Summary{}, &InvalidDocError{Doc: docSummary, Field: key, Reason: "duplicate field"}
		}
		seen[key] = true
		switch key {
		case fieldMongoID:
		case FieldWrittenAt:
			if v.Type != bson.TypeDateTime {
				return rollup.Summary{}, typeError(docSummary, key, v, "date")
			}
		case FieldTerm:
			_, err = countField(docSummary, key, v)
		case FieldID:
			s.ID, err = stringField(docSummary, key, v)
		case FieldType:
			s.Type, err = stringField(docSummary, key, v)
		case FieldProject:
			s.Project, err = stringField(docSummary, key, v)
		case FieldTimestamp:
			s.Start, err = timeField(docSummary, key, v)
			if err == nil && !BucketStart(t, s.Start).Equal(s.Start) {
				err = &InvalidDocError{Doc: docSummary, Field: key, Reason: fmt.Sprintf("%s is not the start of a %s bucket", s.Start.Format(time.RFC3339), t)}
			}
		case FieldVersion:
			s.Rev, err = countField(docSummary, key, v)
		case FieldCount:
			count, err = countField(docSummary, key, v)
		case FieldMax:
			s.Max, err = countField(docSummary, key, v)
		case FieldMin:
			s.Min, err = countField(docSummary, key, v)
		case FieldSum:
			s.Sum, err = countField(docSummary, key, v)
		case FieldLastOnline:
			s.Last, err = countField(docSummary, key, v)
		case FieldReported:
			s.Reported, err = countField(docSummary, key, v)
		case FieldExpected:
			s.Expected, err = countField(docSummary, key, v)
		case FieldFull:
			s.Full, err = countField(docSummary, key, v)
		case FieldTicks:
			s.Ticks, err = ticksField(v, slots)
		default:
			return rollup.Summary{}, &InvalidDocError{Doc: docSummary, Field: key, Reason: "unknown field"}
		}
		if err != nil {
			return rollup.Summary{}, err
		}
	}
	for _, key := range summaryFields {
		if !seen[key] {
			return rollup.Summary{}, &InvalidDocError{Doc: docSummary, Field: key, Reason: "missing"}
		}
	}
	if n := s.Count(); n != count {
		return rollup.Summary{}, &InvalidDocError{Doc: docSummary, Field: FieldCount, Reason: fmt.Sprintf("%d, but ticks has %d", count, n)}
	}
	if s.Full > count {
		return rollup.Summary{}, &InvalidDocError{Doc: docSummary, Field: FieldFull, Reason: fmt.Sprintf("%d, more than count %d", s.Full, count)}
	}
	return s, nil
}

func ticksField(v bson.RawValue, slots int) (rollup.TickSet, error) {
	var s rollup.TickSet
	sub, data, ok := v.BinaryOK()
	if !ok {
		return s, typeError(docSummary, FieldTicks, v, "binData")
	}
	if sub != bson.TypeBinaryGeneric || len(data) != (slots+7)/8 {
		return s, &InvalidDocError{Doc: docSummary, Field: FieldTicks, Reason: fmt.Sprintf("want %d bytes of subtype 0, have %d bytes of subtype %d", (slots+7)/8, len(data), sub)}
	}
	for i, b := range data {
		for b != 0 {
			j := bits.TrailingZeros8(b)
			b &^= 1 << j
			slot := i*8 + j
			if slot >= slots {
				return s, &InvalidDocError{Doc: docSummary, Field: FieldTicks, Reason: fmt.Sprintf("slot %d beyond the bucket's %d ticks", slot, slots)}
			}
			s.Add(slot)
		}
	}
	return s, nil
}
