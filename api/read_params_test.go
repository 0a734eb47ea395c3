package api

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// paramsNow is the clock of the parameter tests: 2.5 minutes into the 10:05 tick.
var paramsNow = time.Date(2024, 5, 1, 10, 7, 30, 0, time.UTC)

func testReader() *reader {
	return &reader{tick: tree.DefaultTick, now: func() time.Time { return paramsNow }}
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestSeriesQuery(t *testing.T) {
	tests := []struct {
		q        string
		from, to string
		step     time.Duration
		agg      string
		errField string
	}{
		{q: "node=a", from: "2024-04-30T10:10:00Z", to: "2024-05-01T10:10:00Z", step: 5 * time.Minute, agg: "max"},
		{q: "node=a&step=1h&agg=mean", from: "2024-04-24T11:00:00Z", to: "2024-05-01T11:00:00Z", step: time.Hour, agg: "mean"},
		{q: "node=a&step=1d&agg=last", from: "2024-02-02T00:00:00Z", to: "2024-05-02T00:00:00Z", step: 24 * time.Hour, agg: "last"},
		{q: "node=a&step=1h&from=2024-05-01T08:30:00%2B02:00&to=2024-05-01T09:00:01Z", from: "2024-05-01T06:00:00Z", to: "2024-05-01T10:00:00Z", step: time.Hour, agg: "max"},
		{q: "node=a&to=2024-05-01T00:00:00Z", from: "2024-04-30T00:00:00Z", to: "2024-05-01T00:00:00Z", step: 5 * time.Minute, agg: "max"},
		{q: "node=a&from=2024-05-01T10:00:00Z", from: "2024-05-01T10:00:00Z", to: "2024-05-01T10:10:00Z", step: 5 * time.Minute, agg: "max"},
		{q: "node=a&from=2024-04-01T00:00:00Z&to=2024-05-05T17:20:00Z", from: "2024-04-01T00:00:00Z", to: "2024-05-05T17:20:00Z", step: 5 * time.Minute, agg: "max"},
		{q: "node=a&from=2024-04-01T00:00:00Z&to=2024-05-05T17:20:01Z", errField: "from"},
		{q: "node=a&step=1d&from=2023-01-01T00:00:00Z&to=2025-01-02T00:00:00Z", errField: "from"},
		{q: "node=a&step=1d&agg=min&from=2023-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", from: "2023-01-01T00:00:00Z", to: "2025-01-01T00:00:00Z", step: 24 * time.Hour, agg: "min"},
		{q: "node=a&from=2024-05-01T10:00:00Z&to=2024-05-01T10:00:00Z", errField: "from"},
		{q: "node=a&from=2024-05-02T00:00:00Z", errField: "from"},
		{q: "", errField: "node"},
		{q: "node=", errField: "node"},
		{q: "node=a.b", errField: "node"},
		{q: "node=a&step=5min", errField: "step"},
		{q: "node=a&agg=avg", errField: "agg"},
		{q: "node=a&from=2024-05-01", errField: "from"},
		{q: "node=a&to=3000-01-01T00:00:00Z", errField: "to"},
		{q: "node=a&node=b", errField: "node"},
		{q: "node=a&tick=2024-05-01T00:00:00Z", errField: "tick"},
	}
	for _, tc := range tests {
		q, err := url.ParseQuery(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		sq, err := testReader().seriesQuery(q)
		if tc.errField != "" {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || he.body.Error != apiv1.ErrInvalidParameter ||
				len(he.body.Errors) != 1 || he.body.Errors[0].Field != tc.errField {
				t.Errorf("%q: err %v, want a 400 naming %s", tc.q, err, tc.errField)
			}
			continue
		}
		if err != nil || !sq.from.Equal(mustTime(tc.from)) || !sq.to.Equal(mustTime(tc.to)) || sq.step != tc.step || sq.agg != tc.agg {
			t.Errorf("%q: %+v, %v; want [%s, %s) step %s agg %s", tc.q, sq, err, tc.from, tc.to, tc.step, tc.agg)
		}
	}
}

// FuzzSeriesQuery: any query string is either a 400 naming a parameter or a window within
// the limits, aligned to a valid step.
func FuzzSeriesQuery(f *testing.F) {
	for _, s := range []string{
		"node=a", "node=a&step=1h&agg=mean&from=2024-04-01T00:00:00Z&to=2024-05-01T00:00:00Z",
		"node=a&step=1d&from=1970-01-01T00:00:00Z&to=2199-12-31T23:59:59.999999999Z", "node=a&from=2024-05-01T10:00:00-23:59",
		"node=a&to=1970-01-01T00:00:00Z", "node=a&x=1", "node=%ff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		sq, err := testReader().seriesQuery(q)
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || len(he.body.Errors) != 1 || he.body.Errors[0].Field == "" {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		n := sq.to.Sub(sq.from) / sq.step
		if !sq.from.Before(sq.to) || !tree.IsAligned(sq.from, sq.step) || !tree.IsAligned(sq.to, sq.step) ||
			n > MaxSeriesPoints || sq.to.Sub(sq.from) > MaxSeriesWindow || sq.node == "" ||
			(sq.agg != apiv1.AggMax && sq.agg != apiv1.AggMean && sq.agg != apiv1.AggLast) {
			t.Fatalf("%q: accepted %+v", raw, sq)
		}
	})
}

// TestDownsample checks the combination rules on hand-made ticks (the HTTP tests cross-check
// them on random data).
func TestDownsample(t *testing.T) {
	from := mustTime("2024-05-01T00:00:00Z")
	v := func(online, reported, expected int64) tickValue {
		return tickValue{present: true, online: online, reported: reported, expected: expected}
	}
	gap := func(expected int64) tickValue { return tickValue{expected: expected} }
	ticks := []tickValue{v(4, 2, 2), v(8, 2, 2), v(6, 2, 2), v(1, 1, 2), gap(2), v(3, 2, 2), gap(2), gap(2), gap(0)}
	f := func(x float64) *float64 { return &x }
	tests := []struct {
		ticks []tickValue
		agg   string
		per   int
		want  []apiv1.SeriesPoint
	}{
		{ticks, apiv1.AggMax, 3, []apiv1.SeriesPoint{
			{T: from, Online: f(8), Reported: 6, Expected: 6, Complete: true},
			{T: from.Add(15 * time.Minute), Online: f(3), Reported: 3, Expected: 6},
			{T: from.Add(30 * time.Minute), Reported: 0, Expected: 4},
		}},
		{ticks, apiv1.AggMean, 3, []apiv1.SeriesPoint{
			{T: from, Online: f(6), Reported: 6, Expected: 6, Complete: true},
			{T: from.Add(15 * time.Minute), Online: f(2), Reported: 3, Expected: 6},
			{T: from.Add(30 * time.Minute), Expected: 4},
		}},
		{ticks, apiv1.AggLast, 4, []apiv1.SeriesPoint{
			{T: from, Online: f(1), Reported: 7, Expected: 8},
			{T: from.Add(20 * time.Minute), Online: f(3), Reported: 2, Expected: 8},
			{T: from.Add(40 * time.Minute), Expected: 0},
		}},
		{ticks, apiv1.AggMean, 1, nil},
	}
	// Ticks that have not started: without a document they neither expect leaves nor make
	// the step incomplete; a step of only such ticks is a gap.
	future := tickValue{future: true}
	withFuture := append(ticks[:8:8], v(5, 2, 2), future, v(7, 2, 2), future, future, future)
	tests = append(tests, struct {
		ticks []tickValue
		agg   string
		per   int
		want  []apiv1.SeriesPoint
	}{withFuture, apiv1.AggMax, 3, []apiv1.SeriesPoint{
		{T: from, Online: f(8), Reported: 6, Expected: 6, Complete: true},
		{T: from.Add(15 * time.Minute), Online: f(3), Reported: 3, Expected: 6},
		{T: from.Add(30 * time.Minute), Online: f(5), Reported: 2, Expected: 6},
		{T: from.Add(45 * time.Minute), Online: f(7), Reported: 2, Expected: 2, Complete: true},
		{T: from.Add(60 * time.Minute)},
	}})
	for _, tc := range tests {
		got := downsample(tc.ticks, from, 5*time.Minute, tc.per, tc.agg)
		if tc.want == nil { // one point per tick
			if len(got) != len(ticks) || got[3].Complete || *got[3].Online != 1 || got[4].Online != nil || got[8].Expected != 0 || !got[0].Complete {
				t.Errorf("per 1: %+v", got)
			}
			continue
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s/%d: %d points", tc.agg, tc.per, len(got))
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if !g.T.Equal(w.T) || g.Reported != w.Reported || g.Expected != w.Expected || g.Complete != w.Complete ||
				(g.Online == nil) != (w.Online == nil) || (g.Online != nil && *g.Online != *w.Online) {
				t.Errorf("%s/%d point %d: %+v, want %+v", tc.agg, tc.per, i, g, w)
			}
		}
	}
}

func TestTimeParam(t *testing.T) {
	tests := []struct {
		v    string
		want string // RFC 3339 in UTC; "" = refused
	}{
		{"2024-05-01T10:05:00Z", "2024-05-01T10:05:00Z"},
		{"2024-05-01t10:05:00z", "2024-05-01T10:05:00Z"},
		{"2024-05-01t10:05:00Z", "2024-05-01T10:05:00Z"},
		{"2024-05-01T10:05:00z", "2024-05-01T10:05:00Z"},
		{"2024-05-01t12:05:00+02:00", "2024-05-01T10:05:00Z"},
		{"2024-05-01T10:05:00.25z", "2024-05-01T10:05:00.25Z"},
		{"2024-05-01T10:05:00-00:00", "2024-05-01T10:05:00Z"},
		{"2024-05-01T10:05:00,25Z", ""}, // a comma is not RFC 3339's decimal point
		{"2024-05-01 10:05:00Z", ""},
		{"2024-05-01T10:05:00", ""},
		{"2024-05-01", ""},
		{"2024-05-01T10:05Z", ""},
		{"2024-05-01T24:00:00Z", ""},
		{"2024-13-01T10:05:00Z", ""},
		{"2024-05-01T10:05:00+0200", ""},
		{"2024-05-01T10:05:00zz", ""},
		{"2024-05-01tt10:05:00Z", ""},
		{"1969-12-31T23:59:59Z", ""},
		{"2200-01-01T00:00:00Z", ""},
	}
	for _, tc := range tests {
		got, ok, err := timeParam(url.Values{"from": {tc.v}}, "from")
		if tc.want == "" {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || he.body.Errors[0].Field != "from" {
				t.Errorf("%q: %v, %v; want a 400 naming from", tc.v, got, err)
			}
			continue
		}
		if err != nil || !ok || !got.Equal(mustTime(tc.want)) || got.Location() != time.UTC {
			t.Errorf("%q: %v %v %v, want %s", tc.v, got, ok, err, tc.want)
		}
	}
	if _, ok, err := timeParam(url.Values{}, "from"); ok || err != nil {
		t.Errorf("absent: %v %v", ok, err)
	}
}

// rfc3339 is RFC 3339's date-time (section 5.6) as a regular expression: the naive
// implementation FuzzTimeParam checks parseRFC3339 against.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)

// FuzzTimeParam: a time parameter is accepted exactly when it has RFC 3339's syntax and
// names a valid time within 1970–2199, and then it means what time.Parse makes of its
// uppercase spelling.
func FuzzTimeParam(f *testing.F) {
	for _, s := range []string{"2024-05-01T10:05:00Z", "2024-05-01t10:05:00z", "2024-05-01T10:05:00.123456789+14:00",
		"2024-05-01T10:05:00,5Z", "2024-02-30T00:00:00Z", "1970-01-01T00:00:00+00:01", "2199-12-31T23:59:59.999999999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok, err := timeParam(url.Values{"t": {v}}, "t")
		if v == "" {
			if ok || err != nil {
				t.Fatalf("empty: %v %v", ok, err)
			}
			return
		}
		upper := strings.ToUpper(v)
		want, perr := time.Parse(time.RFC3339Nano, upper)
		valid := rfc3339.MatchString(v) && perr == nil && !want.Before(minReadTime) && want.Before(maxReadTime)
		if valid != (err == nil) {
			t.Fatalf("%q: accepted %v (%v), RFC 3339 says %v (%v)", v, err == nil, err, valid, perr)
		}
		if valid && (!ok || !got.Equal(want)) {
			t.Fatalf("%q: %v, want %v", v, got, want)
		}
	})
}

func TestIntParam(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int // 0: refused
	}{
		{"", 10}, {"1", 1}, {"3", 3}, {"1000", 1000}, {"+3", 0}, {"03", 0}, {"-0", 0}, {"0", 0}, {"1001", 0},
		{" 3", 0}, {"3 ", 0}, {"3.0", 0}, {"0x3", 0}, {"1_0", 0}, {"٣", 0}, {"99999999999999999999", 0},
		{"-1", 0}, {"1e2", 0}, {"5.", 0}, {"x", 0}, {"007", 0},
	} {
		q := url.Values{}
		if tc.v != "" {
			q.Set("n", tc.v)
		}
		got, err := intParam(q, "n", 10, 1, 1000)
		if tc.want == 0 {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || he.body.Errors[0].Field != "n" {
				t.Errorf("n=%q: %d, %v; want a 400 naming n", tc.v, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("n=%q: %d, %v; want %d", tc.v, got, err, tc.want)
		}
	}
}

// TestTickParamFuture: a tick after the latest one ingest accepts now (the current tick plus
// the clock skew) is refused; the current and the skewed next tick are not.
func TestTickParamFuture(t *testing.T) {
	rd := testReader()
	rd.skew = 5 * time.Minute // paramsNow is 10:07:30: ingest accepts up to the 10:10 tick
	for _, tc := range []struct {
		tick string
		want string // "" = refused
	}{
		{"2024-05-01T10:05:00Z", "2024-05-01T10:05:00Z"},
		{"2024-05-01T10:09:59Z", "2024-05-01T10:05:00Z"},
		{"2024-05-01T10:14:59Z", "2024-05-01T10:10:00Z"},
		{"2024-05-01T10:15:00Z", ""},
		{"2024-05-02T10:05:00Z", ""},
		{"2199-12-31T23:55:00Z", ""},
	} {
		got, ok, err := rd.tickParam(url.Values{"tick": {tc.tick}})
		if tc.want == "" {
			var he *httpError
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || he.body.Errors[0].Field != "tick" ||
				!strings.Contains(he.body.Message, "future") {
				t.Errorf("tick %s: %v %v, want a 400 saying it is in the future", tc.tick, got, err)
			}
			continue
		}
		if err != nil || !ok || !got.Equal(mustTime(tc.want)) {
			t.Errorf("tick %s: %v %v %v, want %s", tc.tick, got, ok, err, tc.want)
		}
	}
}

// TestNodeParamNotASCII: a node id that is not ASCII is named by its character and its
// position in characters, as in the ingest API.
func TestNodeParamNotASCII(t *testing.T) {
	for q, want := range map[string]string{
		"node=srv-%C3%A91":  `character 4 is "é" (U+00E9, not ASCII)`,
		"node=%D0%B0bc":     `character 0 is "а" (U+0430, not ASCII)`,
		"node=ab%FFc":       `character 2 is the byte 0xFF, which is not UTF-8`,
		"node=a%E2%80%8Bb$": `character 1 is "\u200b" (U+200B, not ASCII)`,
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodeParam(v)
		var he *httpError
		if !errors.As(err, &he) || len(he.body.Errors) != 1 || he.body.Errors[0].Field != "node" || !strings.Contains(he.body.Errors[0].Message, want) {
			t.Errorf("%s: %v, want a 400 naming node that says %q", q, err, want)
		}
	}
}
