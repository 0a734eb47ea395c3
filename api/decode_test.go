package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// decodeRequest parses and validates a body as the handler does (minus auth).
func decodeRequest(body []byte, lim limits, now time.Time) (*submission, *httpError) {
	raw, herr := decodeBody(body, lim.maxItems, &rawRequest{})
	if herr != nil {
		return nil, herr
	}
	return validate(raw, lim, now, &submission{})
}

func fuzzLimits() limits {
	return limits{maxItems: 8, maxOnline: 1000, tick: 5 * time.Minute, lateWindow: 24 * time.Hour, futureSkew: 5 * time.Minute}
}

// FuzzDecodeRequest: the body parser never panics; what it accepts is valid by every rule
// and agrees with encoding/json's reading of the same body; what it rejects is a 4xx that
// names item fields with their index.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		reqBody(twoItems),
		reqBody(`[]`),
		reqBody(`[{"id":"a","type":"t","online":1},{"id":"a","type":"t","online":2}]`),
		reqBody(`[{"id":"a$","type":"t","online":-1},[1,{"x":[]}],null,"s",{"id":7}]`),
		`{"project":"p","timestamp":"2024-05-01T10:05:00Z","submission_id":"s","counts":[{"id":"a","type":"t","online":1e3}]}`,
		`{"project":null,"counts":null,"observed_at":null}`,
		`{"a":{"b":[1,2,{"c":null}]}}`,
		`[`, `{`, `"x"`, `{"project":"p"}}`, `{} {}`, ``, `nul`,
		// Number edge cases and names that are not ASCII.
		reqBody(`[{"id":"a","type":"t","online":-0},{"id":"b","type":"t","online":1.0},{"id":"c","type":"t","online":1e2}]`),
		reqBody(`[{"id":"a","type":"t","online":01}]`),
		reqBody(`[{"id":"a","type":"t","online":+1}]`),
		reqBody(`[{"id":"a","type":"t","online":9223372036854775808}]`),
		reqBody(`[{"id":"a","type":"t","online":NaN}]`),
		reqBody(`[{"id":"srv-é","type":"t","online":1},{"id":"\u0430","type":"t","online":1}]`),
		reqBody("[{\"id\":\"a\xff\",\"type\":\"t\",\"online\":1}]"),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, herr := decodeRequest(body, lim, testNow())
		if herr != nil {
			if herr.status != http.StatusBadRequest && herr.status != http.StatusRequestEntityTooLarge && herr.status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d", herr.status)
			}
			if herr.body.Error == "" || herr.body.Message == "" {
				t.Fatalf("error without code or message: %+v", herr.body)
			}
			for _, fe := range herr.body.Errors {
				checkIndex(t, fe)
			}
			return
		}
		checkAccepted(t, body, sub, lim)
	})
}

// checkAccepted holds an accepted request to every rule and to encoding/json's reading.
func checkAccepted(t *testing.T, body []byte, sub *submission, lim limits) {
	t.Helper()
	if len(sub.items) > lim.maxItems {
		t.Fatalf("%d items accepted, limit %d", len(sub.items), lim.maxItems)
	}
	if tree.ValidateName("project", sub.project) != nil || tree.ValidateName("submission_id", sub.submissionID) != nil {
		t.Fatalf("invalid project or submission id accepted: %q %q", sub.project, sub.submissionID)
	}
	if !tree.IsAligned(sub.timestamp, lim.tick) {
		t.Fatalf("unaligned timestamp accepted: %v", sub.timestamp)
	}
	seen := map[[2]string]bool{}
	for _, it := range sub.items {
		if tree.ValidateID(it.ID) != nil || tree.ValidateType(it.Type) != nil || it.Online < 0 || it.Online > lim.maxOnline {
			t.Fatalf("invalid item accepted: %+v", it)
		}
		k := [2]string{it.ID, it.Type}
		if seen[k] {
			t.Fatalf("duplicate accepted: %v", k)
		}
		seen[k] = true
		if it.Project != sub.project || !it.Timestamp.Equal(sub.timestamp) || it.Version != sub.version || it.SubmissionID != sub.submissionID {
			t.Fatalf("item %+v does not carry the request's fields", it)
		}
	}
	// The naive reading: encoding/json (case-insensitive, last duplicate wins) must see the same
	// values, since the strict parser only accepts exact, unique keys.
	var ref struct {
		Project      string         `json:"project"`
		Timestamp    time.Time      `json:"timestamp"`
		SubmissionID string         `json:"submission_id"`
		Counts       []apiv1.Count  `json:"counts"`
		ObservedAt   *time.Time     `json:"observed_at"`
		Extra        map[string]any `json:"-"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		t.Fatalf("accepted a body encoding/json rejects: %v", err)
	}
	if ref.Project != sub.project || ref.SubmissionID != sub.submissionID || !ref.Timestamp.Equal(sub.timestamp) || len(ref.Counts) != len(sub.items) {
		t.Fatalf("encoding/json reads %+v, strict parser %+v", ref, sub)
	}
	if ref.ObservedAt != nil && ref.ObservedAt.UnixNano() != sub.version {
		t.Fatalf("observed_at %v, version %d", ref.ObservedAt, sub.version)
	}
	for i, c := range ref.Counts {
		it := sub.items[i]
		if c.ID != it.ID || c.Type != it.Type || c.Online != it.Online {
			t.Fatalf("item %d: encoding/json %+v, strict %+v", i, c, it)
		}
	}
	// Every accepted count was written with digits only (not -0, 1.0, 1e2).
	var nums struct {
		Counts []struct {
			Online json.Number `json:"online"`
		} `json:"counts"`
	}
	dec = json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&nums); err != nil {
		t.Fatalf("accepted a body encoding/json rejects: %v", err)
	}
	for i, c := range nums.Counts {
		if s := string(c.Online); s == "" || strings.Trim(s, "0123456789") != "" {
			t.Fatalf("item %d: accepted the count %q", i, s)
		}
	}
}

// TestDecodeAccepts: bodies the strict parser must accept, cross-checked like the fuzz target.
func TestDecodeAccepts(t *testing.T) {
	lim := fuzzLimits()
	bodies := []string{
		reqBody(twoItems),
		reqBody(`[]`),
		"  \n" + reqBody(`[{"online":0,"type":"t","id":"a"}]`) + "\n\t ",
		`{"counts":[{"id":"a","type":"t","online":1000}],"submission_id":"x:y-z_1","timestamp":"2024-05-01T12:05:00+02:00","project":"proj-a","observed_at":null}`,
		`{"project":"proj-a","timestamp":"2024-05-01T10:05:00.000Z","submission_id":"s","counts":[{"id":"a","type":"t","online":0},{"id":"a","type":"u","online":1},{"id":"b","type":"t","online":2}]}`,
		`{"project":"\u0070roj-a","timestamp":"2024-05-01T10:05:00Z","submission_id":"s","counts":[]}`,
	}
	for _, b := range bodies {
		sub, herr := decodeRequest([]byte(b), lim, testNow())
		if herr != nil {
			t.Fatalf("rejected %s: %v %+v", b, herr, herr.body.Errors)
		}
		checkAccepted(t, []byte(b), sub, lim)
	}
}

// TestDecodeTooManyItemsStopsEarly: the parser stops at MaxItems+1 without reading the rest.
func TestDecodeTooManyItemsStopsEarly(t *testing.T) {
	lim := fuzzLimits()
	var b strings.Builder
	b.WriteString(`{"counts":[`)
	for i := 0; i < 20; i++ {
		b.WriteString(`{"id":"a","type":"t","online":1},`)
	}
	b.WriteString(`broken`) // never reached
	_, herr := decodeRequest([]byte(b.String()), lim, testNow())
	if herr == nil || herr.status != http.StatusRequestEntityTooLarge || herr.body.Error != apiv1.ErrTooManyItems {
		t.Fatalf("got %v, want 413 too_many_items", herr)
	}
}
