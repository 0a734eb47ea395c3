package apiv1

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// reference encodes v as the server's answers were encoded before AppendJSON: a json.Encoder
// without HTML escaping, minus the trailing newline.
func reference(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// randString draws from plain ids, HTML, quotes, control bytes, U+2028/9, other UTF-8 and
// invalid UTF-8.
func randString(rng *rand.Rand) string {
	parts := []string{"a", "srv-1", "<&>", `"`, `\`, "\x00", "\x1f", "\x7f", "\b\f\n\r\t", "\u2028", "\u2029", "é", "日本", "\xff", "\xe2\x80", "😀", " "}
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func randTime(rng *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600), time.FixedZone("x", -(5*3600 + 30*60))}
	t := time.Unix(rng.Int64N(4e9), 0).In(zones[rng.IntN(len(zones))])
	if rng.IntN(2) == 0 {
		t = t.Add(time.Duration(rng.Int64N(1e9)))
	}
	return t
}

func randResponse(rng *rand.Rand) *CountsResponse {
	r := &CountsResponse{SubmissionID: randString(rng), Project: randString(rng), Timestamp: randTime(rng),
		Version: int64(rng.Uint64()), Summary: Summary{Applied: rng.IntN(100), Stale: -rng.IntN(3), Rejected: rng.IntN(1 << 40)}}
	if n := rng.IntN(5); n > 0 {
		r.Items = make([]ItemResult, n-1)
		for i := range r.Items {
			r.Items[i] = ItemResult{Index: rng.IntN(10_000) - 5, ID: randString(rng), Type: randString(rng),
				Status: []Status{StatusApplied, StatusStale, StatusRejected, ""}[rng.IntN(4)]}
			if rng.IntN(3) == 0 {
				r.Items[i].Error = randString(rng)
			}
		}
	}
	return r
}

// TestAppendJSONMatchesEncodingJSON: both AppendJSON methods produce encoding/json's bytes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		resp := randResponse(rng)
		req := &CountsRequest{Project: randString(rng), Timestamp: randTime(rng), SubmissionID: randString(rng)}
		if rng.IntN(2) == 0 {
			o := randTime(rng)
			req.ObservedAt = &o
		}
		if n := rng.IntN(5); n > 0 {
			req.Counts = make([]Count, n-1)
			for i := range req.Counts {
				req.Counts[i] = Count{ID: randString(rng), Type: randString(rng), Online: int64(rng.Uint64())}
			}
		}
		for _, v := range []interface{ AppendJSON([]byte) ([]byte, error) }{resp, req} {
			want, err := reference(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.AppendJSON([]byte("prefix"))
			if err != nil || string(got) != "prefix"+string(want) {
				t.Fatalf("AppendJSON of %+v:\n got %s (%v)\nwant prefix%s", v, got, err, want)
			}
		}
	}
}

// TestAppendJSONUnencodableTime: a timestamp encoding/json cannot encode fails the same way
// and appends nothing.
func TestAppendJSONUnencodableTime(t *testing.T) {
	bad := time.Date(10_000, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []interface{ AppendJSON([]byte) ([]byte, error) }{
		&CountsResponse{Timestamp: bad},
		&CountsRequest{Timestamp: bad},
		&CountsRequest{Timestamp: ok, ObservedAt: &bad},
	} {
		if _, err := reference(v); err == nil {
			t.Fatalf("encoding/json encodes %+v", v)
		}
		got, err := v.AppendJSON([]byte("x"))
		if err == nil || string(got) != "x" {
			t.Errorf("AppendJSON(%+v) = %q, %v; want an error and nothing appended", v, got, err)
		}
	}
}

// checkDecode compares DecodeCountsResponse with json.Unmarshal into a zero value.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want CountsResponse
	wantErr := json.Unmarshal(data, &want)
	got := CountsResponse{SubmissionID: "garbage", Items: []ItemResult{{ID: "x"}}}
	err := DecodeCountsResponse(data, &got)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, encoding/json %v", data, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
	}
}

// TestDecodeCountsResponse: the server's answers take the fast path and decode as
// encoding/json decodes them; other spellings of them too (through the fallback).
func TestDecodeCountsResponse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		resp := randResponse(rng)
		data, err := resp.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		checkDecode(t, data)
		indented, err := json.MarshalIndent(resp, " ", "\t") // whitespace and HTML escapes
		if err != nil {
			t.Fatal(err)
		}
		checkDecode(t, indented)
	}
	// A plain answer (what the server sends agents) is read without encoding/json.
	plain := &CountsResponse{SubmissionID: "s-1", Project: "p", Timestamp: time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC), Version: 42,
		Items:   []ItemResult{{Index: 0, ID: "a", Type: "t", Status: StatusApplied}, {Index: 1, ID: "b", Type: "t", Status: StatusRejected, Error: "no"}},
		Summary: Summary{Applied: 1, Rejected: 1}}
	for _, p := range []*CountsResponse{plain, {Items: []ItemResult{}}} {
		data, _ := p.AppendJSON(nil)
		var got CountsResponse
		if !fastDecodeResponse(data, &got) {
			t.Fatalf("fast path refused %s", data)
		}
		checkDecode(t, data)
	}
	for _, s := range decodeSeeds() {
		checkDecode(t, []byte(s))
	}
}

func decodeSeeds() []string {
	return []string{
		``, `null`, `{}`, `[]`, `{} x`, ` {"version":1} `, `{"version":1.5}`, `{"version":1e3}`, `{"version":01}`,
		`{"version":-0}`, `{"version":99999999999999999999}`, `{"version":"1"}`, `{"Version":1}`, `{"version":1,"version":2}`,
		`{"items":null}`, `{"items":[]}`, `{"items":[null]}`, `{"items":[{}]}`, `{"items":[{"index":1},]}`,
		`{"items":[{"index":1,"status":"applied","extra":true}]}`, `{"summary":{"applied":1,"stale":2,"rejected":3}}`,
		`{"summary":null}`, `{"timestamp":"2024-05-01T10:05:00Z"}`, `{"timestamp":"2024-05-01T10:05:00+02:00"}`,
		`{"timestamp":"2024-05-01 10:05:00Z"}`, `{"timestamp":null}`, `{"project":"a\"b"}`, `{"project":"é"}`,
		`{"project":"` + "\x01" + `"}`, `{"submission_id":"s","submission_id":"t"}`,
	}
}

// FuzzDecodeCountsResponse: DecodeCountsResponse agrees with json.Unmarshal on any input.
func FuzzDecodeCountsResponse(f *testing.F) {
	for _, s := range decodeSeeds() {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 5 {
		data, _ := randResponse(rng).AppendJSON(nil)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// FuzzAppendString: strings are quoted exactly as encoding/json quotes them.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"\`, "\x00\x1f\x7f", "\u2028\u2029", "\xff\xe2\x80", "<&>", "日本😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := reference(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}
