package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
)

// normalized makes a rawRequest comparable with reflect.DeepEqual: an empty counts array
// is nil whichever parser read it.
func normalized(r *rawRequest) *rawRequest {
	c := *r
	if len(c.counts) == 0 {
		c.counts = nil
	}
	return &c
}

// checkFastAgrees fails when fastParse accepts body but parseRequest reads it otherwise.
func checkFastAgrees(t *testing.T, body []byte, maxItems int) bool {
	t.Helper()
	fast := &rawRequest{}
	if !fastParse(body, maxItems, fast) {
		return false
	}
	slow, herr := parseRequest(body, maxItems)
	if herr != nil {
		t.Fatalf("fast path accepted %q, parseRequest rejects it: %v", body, herr)
	}
	if !reflect.DeepEqual(normalized(fast), normalized(slow)) {
		t.Fatalf("body %q:\nfast %+v\nslow %+v", body, *fast, *slow)
	}
	// Reading into a request that held another body (as the handler's reused one does)
	// gives the same.
	reused := dirtyRawRequest()
	if !fastParse(body, maxItems, reused) {
		t.Fatalf("body %q: fast path refused it into a used request", body)
	}
	if !reflect.DeepEqual(normalized(reused), normalized(slow)) {
		t.Fatalf("body %q:\ninto a used request %+v\nslow %+v", body, *reused, *slow)
	}
	return true
}

// dirtyRawRequest is a request with every field set and spare counts capacity.
func dirtyRawRequest() *rawRequest {
	old := optString{v: "old", ok: true}
	counts := make([]rawCount, 3, 16)
	for i := range counts {
		counts[i] = rawCount{id: old, typ: old, online: "7", hasOnl: true, notObj: true,
			problems: []apiv1.FieldError{{Field: "counts[0].id", Message: "old"}}}
	}
	return &rawRequest{project: old, timestamp: old, observedAt: old, submissionID: old, hasCounts: true, counts: counts}
}

// FuzzFastParse: whatever the fast path accepts, the detailed parser reads identically.
func FuzzFastParse(f *testing.F) {
	for _, s := range fastBodies() {
		f.Add([]byte(s))
	}
	for _, s := range slowBodies() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastAgrees(t, body, fuzzLimits().maxItems)
	})
}

// fastBodies are plain requests the fast path must read.
func fastBodies() []string {
	return []string{
		reqBody(twoItems),
		reqBody(`[]`),
		"  \n" + reqBody(`[{"online":0,"type":"t","id":"a"}]`) + "\n\t ",
		`{"counts":[{"id":"a","type":"t","online":1000}],"submission_id":"x:y-z_1","timestamp":"2024-05-01T12:05:00+02:00","project":"proj-a"}`,
		`{}`,
		`{ "project" : "p" , "counts" : [ { "id" : "a" , "type" : "t" , "online" : 5 } , { "id" : "b" , "online" : -0 } ] }`,
		// Valid JSON with invalid values: the fast path reads them, validation rejects them.
		reqBody(`[{"id":"a$","type":"t","online":-1},{"id":"a","type":"t","online":99999999999999999999999}]`),
		reqBody(`[{"id":"a","type":"t","online":1},{"id":"a","type":"t","online":2}]`),
		reqBody(`[{"id":"a","type":"t"},{"type":"t","online":1}]`),
		`{"project":"","timestamp":"yesterday","submission_id":" ~` + "\x7f" + `"}`,
		reqBody(`[{"id":"a","type":"t","online":-0},{"id":"b","type":"t","online":9223372036854775808}]`),
	}
}

// slowBodies are bodies the fast path must leave to parseRequest: anything but plain.
func slowBodies() []string {
	return []string{
		``, `nul`, `[`, `{`, `"x"`, `[1,2]`, `{"project":"p"}}`, `{} {}`, `{"project":"p",}`, `{,}`,
		`{"project":null}`,
		`{"project":"\u0070roj-a"}`,
		`{"project":"caf` + "\xc3\xa9" + `"}`,
		`{"project":"a` + "\x01" + `"}`,
		`{"Project":"p"}`,
		`{"project":"p","project":"p"}`,
		`{"extra":1}`,
		`{"project":5}`,
		`{"counts":null}`,
		`{"counts":{}}`,
		reqBody(`[{}]`),
		reqBody(`[null]`),
		reqBody(`[{"id":"a","type":"t","online":1.5}]`),
		reqBody(`[{"id":"a","type":"t","online":1e2}]`),
		reqBody(`[{"id":"a","type":"t","online":01}]`),
		reqBody(`[{"id":"a","type":"t","online":+1}]`),
		reqBody(`[{"id":"a","type":"t","online":1.0}]`),
		reqBody(`[{"id":"a","type":"t","online":-0.0}]`),
		reqBody(`[{"id":"srv-é","type":"t","online":1}]`),
		reqBody(`[{"id":"\u0430","type":"t","online":1}]`),
		reqBody(`[{"id":"a","type":"t","online":-}]`),
		reqBody(`[{"id":"a","type":"t","online":"3"}]`),
		reqBody(`[{"id":"a","type":"t","online":1,"online":2}]`),
		reqBody(`[{"id":"a","type":"t","online":1,"color":"red"}]`),
		reqBody(`[{"id":null,"type":"t","online":1}]`),
		reqBody(`[{"id":"a","type":"t","online":1},]`),
		reqBody(`[{"id":"a","type":"t","online":1}`),
		`{"counts":[` + strings.Repeat(`{"id":"a","type":"t","online":1},`, 8) + `{"id":"a","type":"t","online":1}]}`, // 9 > fuzzLimits
	}
}

// TestFastParse: plain requests take the fast path and read as parseRequest reads them;
// everything else is left to parseRequest.
func TestFastParse(t *testing.T) {
	lim := fuzzLimits()
	for _, b := range fastBodies() {
		if !checkFastAgrees(t, []byte(b), lim.maxItems) {
			t.Errorf("fast path refused %q", b)
		}
	}
	for _, b := range slowBodies() {
		if fastParse([]byte(b), lim.maxItems, dirtyRawRequest()) {
			t.Errorf("fast path accepted %q", b)
		}
	}
}

// TestFastParseAgentBodies: what the agent client sends takes the fast path, and random
// perturbations of it (cut, byte changed, byte inserted) never make the two parsers disagree.
func TestFastParseAgentBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	observed := time.Date(2024, 5, 1, 10, 5, 1, 500_000_000, time.UTC)
	for n := range 12 {
		req := apiv1.CountsRequest{Project: "proj-a", Timestamp: time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC),
			ObservedAt: &observed, SubmissionID: "0123456789abcdef0123456789abcdef", Counts: []apiv1.Count{}}
		for i := range n {
			req.Counts = append(req.Counts, apiv1.Count{ID: fmt.Sprintf("eu-1-srv-%05d", i), Type: "proc", Online: rng.Int64N(1000)})
		}
		body, err := req.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFastAgrees(t, body, 20) {
			t.Fatalf("fast path refused the agent body %s", body)
		}
		sub, herr := decodeRequest(body, fuzzLimits(), testNow())
		if n <= fuzzLimits().maxItems && herr != nil {
			t.Fatalf("agent body %s rejected: %v", body, herr)
		}
		if herr == nil {
			checkAccepted(t, body, sub, fuzzLimits())
		}
		const alphabet = "{}[]:,\" \\-019eE.natrufl"
		for range 300 {
			b := append([]byte(nil), body...)
			switch i := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b = b[:i]
			case 1:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			default:
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
			checkFastAgrees(t, b, 20)
		}
	}
}

// TestOKAnswerBytes: the 200 answer is byte for byte what encoding/json made of it before
// the hand-written encoder (a json.Encoder without HTML escaping).
func TestOKAnswerBytes(t *testing.T) {
	sink := &fakeSink{fn: func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
		res := make([]bulk.Result, len(items))
		for i := range res {
			res[i].Outcome = []bulk.Outcome{bulk.OutcomeApplied, bulk.OutcomeStale, bulk.OutcomeRejected}[i%3]
			if res[i].Outcome == bulk.OutcomeRejected {
				res[i].Err = errors.New(`refused: "<bad>" é` + "\u2028\x01")
			}
		}
		return res, nil
	}}
	srv := newServer(testConfig(t, sink), newFakeTokens())
	r := post(t, srv, tokenA, strings.NewReader(reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":2},{"id":"c","type":"t","online":3}]`)))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.ok); err != nil {
		t.Fatal(err)
	}
	if r.raw != want.String() {
		t.Fatalf("answer\n%s\nencoding/json\n%s", r.raw, want.String())
	}
	if r.ok.Summary != (apiv1.Summary{Applied: 1, Stale: 1, Rejected: 1}) || r.ok.Items[2].Error == "" {
		t.Fatalf("answer %+v", r.ok)
	}
}

// TestBodyBufferReuse: pooled body and answer buffers never leak one request into another,
// whatever the sizes and whether the length is announced, also concurrently.
func TestBodyBufferReuse(t *testing.T) {
	cfg := testConfig(t, &fakeSink{})
	cfg.MaxItems, cfg.MaxBodyBytes = 500, 1<<20
	srv := newServer(cfg, newFakeTokens())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 40 {
				n := []int{0, 1, 3, 100, 500}[rng.IntN(5)]
				prefix := fmt.Sprintf("g%d-%d-", g, rng.IntN(1000))
				var sb strings.Builder
				sb.WriteString("[")
				for i := range n {
					if i > 0 {
						sb.WriteString(",")
					}
					fmt.Fprintf(&sb, `{"id":"%s%d","type":"t","online":%d}`, prefix, i, i)
				}
				sb.WriteString("]")
				var body io.Reader = strings.NewReader(reqBody(sb.String()))
				if rng.IntN(2) == 0 {
					body = io.MultiReader(body) // no announced length
				}
				req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, body)
				req.Header.Set("Authorization", "Bearer "+tokenA)
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				var resp apiv1.CountsResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK || len(resp.Items) != n {
					t.Errorf("status %d, %d items for %d (%v): %.200s", rec.Code, len(resp.Items), n, err, rec.Body)
					return
				}
				for i, it := range resp.Items {
					if it.ID != fmt.Sprintf("%s%d", prefix, i) || it.Index != i || it.Status != apiv1.StatusApplied {
						t.Errorf("item %d of %s: %+v", i, prefix, it)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
