package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gameops/rollup/api/apiv1"
)

// TestValidation: every invalid request is answered with its status and code, names each
// invalid field (with the item index for items), and nothing reaches the Sink.
func TestValidation(t *testing.T) {
	six := `[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":1},{"id":"c","type":"t","online":1},{"id":"d","type":"t","online":1},{"id":"e","type":"t","online":1},{"id":"f","type":"t","online":1}]`
	top := func(fields string) string {
		return `{` + fields + `}`
	}
	const okCounts = `"counts":[{"id":"a","type":"t","online":1}]`
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   string
		wantFields []string // every one must be listed; items carry the index in brackets
		wantMsg    string   // substring of some field message or of the message
	}{
		{"truncated JSON", `{"project":`, 400, apiv1.ErrMalformedJSON, nil, "truncated"},
		{"syntax error", `{"project" "a"}`, 400, apiv1.ErrMalformedJSON, nil, "invalid JSON"},
		{"empty body", ``, 400, apiv1.ErrMalformedJSON, nil, "empty"},
		{"not an object", `[1,2]`, 400, apiv1.ErrMalformedJSON, nil, "JSON object"},
		{"trailing data", reqBody(`[]`) + ` {}`, 400, apiv1.ErrMalformedJSON, nil, "after the JSON object"},
		{"unknown field", top(`"project":"proj-a","extra":1`), 400, apiv1.ErrMalformedJSON, []string{"extra"}, `unknown field "extra"`},
		{"case-variant field", top(`"Project":"proj-a"`), 400, apiv1.ErrMalformedJSON, []string{"Project"}, "unknown field"},
		{"repeated field", top(`"project":"proj-a","project":"proj-a"`), 400, apiv1.ErrMalformedJSON, []string{"project"}, "twice"},
		{"project not a string", top(`"project":5`), 400, apiv1.ErrMalformedJSON, []string{"project"}, "must be a string, not a number"},
		{"counts not an array", top(`"project":"proj-a","counts":{}`), 400, apiv1.ErrMalformedJSON, []string{"counts"}, "must be an array"},
		{"missing everything", top(`"project":"proj-a"`), 400, apiv1.ErrInvalidRequest, []string{"timestamp", "submission_id", "counts"}, "required"},
		{"missing project", top(`"timestamp":"2024-05-01T10:05:00Z","submission_id":"s",` + okCounts), 400, apiv1.ErrInvalidRequest, []string{"project"}, "required"},
		{"null project", top(`"project":null,"timestamp":"2024-05-01T10:05:00Z","submission_id":"s",` + okCounts), 400, apiv1.ErrInvalidRequest, []string{"project"}, "required"},
		{"bad submission id", strings.Replace(reqBody(`[]`), `"sub-1"`, `"sub 1"`, 1), 400, apiv1.ErrInvalidRequest, []string{"submission_id"}, `character 3 is " "`},
		{"long submission id", strings.Replace(reqBody(`[]`), `"sub-1"`, `"`+strings.Repeat("s", 129)+`"`, 1), 400, apiv1.ErrInvalidRequest, []string{"submission_id"}, "129 characters"},
		{"timestamp not RFC 3339", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:00Z`, `2024-05-01 10:05`, 1), 400, apiv1.ErrInvalidRequest, []string{"timestamp"}, "RFC 3339"},
		{"timestamp unaligned", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:00Z`, `2024-05-01T10:06:00Z`, 1), 400, apiv1.ErrInvalidRequest, []string{"timestamp"}, "starts at 2024-05-01T10:05:00Z"},
		{"timestamp unaligned by 1ns", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:00Z`, `2024-05-01T10:05:00.000000001Z`, 1), 400, apiv1.ErrInvalidRequest, []string{"timestamp"}, "not the start of a 5m0s tick"},
		{"observed_at malformed", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:01.5Z`, `yesterday`, 1), 400, apiv1.ErrInvalidRequest, []string{"observed_at"}, "RFC 3339"},
		{"observed_at before 1970", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:01.5Z`, `1969-12-31T23:59:59Z`, 1), 400, apiv1.ErrInvalidRequest, []string{"observed_at"}, "1970"},
		{"item id with dollar", reqBody(`[{"id":"$where","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, `character 0 is "$"`},
		{"item id with dot", reqBody(`[{"id":"a","type":"t","online":1},{"id":"a.b","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[1].id"}, `character 1 is "."`},
		{"item id empty", reqBody(`[{"id":"","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, "empty"},
		{"item type too long", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":1},{"id":"c","type":"` + strings.Repeat("t", 129) + `","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[2].type"}, "at most 128"},
		{"item id missing", reqBody(`[{"type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, "required"},
		{"item online missing", reqBody(`[{"id":"a","type":"t"}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "required"},
		{"item online null", reqBody(`[{"id":"a","type":"t","online":null}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "required"},
		{"item online negative", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":-1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[1].online"}, ">= 0"},
		{"item online absurd", reqBody(`[{"id":"a","type":"t","online":1001}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "above the maximum 1000"},
		{"item online overflows int64", reqBody(`[{"id":"a","type":"t","online":99999999999999999999999}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "above the maximum"},
		{"item online fractional", reqBody(`[{"id":"a","type":"t","online":1.5}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "whole number"},
		{"item online exponent", reqBody(`[{"id":"a","type":"t","online":1e2}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "digits only"},
		// Number edge cases: a count is written in decimal digits only.
		{"item online -0", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":-0}]`), 400, apiv1.ErrInvalidItem, []string{"counts[1].online"}, "-0 is not a count; send 0"},
		{"item online -0 with spaces", reqBody(`[{"id":"a","type":"t","online": -0 }]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "-0 is not a count"},
		{"item online 1.0", reqBody(`[{"id":"a","type":"t","online":1.0}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "not 1.0 (no fraction or exponent)"},
		{"item online -0.0", reqBody(`[{"id":"a","type":"t","online":-0.0}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "digits only, not -0.0"},
		{"item online 0e0", reqBody(`[{"id":"a","type":"t","online":0e0}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "digits only"},
		{"item online 1E2", reqBody(`[{"id":"a","type":"t","online":1E2}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "not 1E2"},
		{"item online 1e400", reqBody(`[{"id":"a","type":"t","online":1e400}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "digits only"},
		{"item online int64 max", reqBody(`[{"id":"a","type":"t","online":9223372036854775807}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "9223372036854775807 is above the maximum 1000"},
		{"item online beyond int64", reqBody(`[{"id":"a","type":"t","online":9223372036854775808}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "9223372036854775808 is above the maximum 1000"},
		{"item online below int64", reqBody(`[{"id":"a","type":"t","online":-9223372036854775809}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "must be >= 0, not -9223372036854775809"},
		{"item online 600 digits", reqBody(`[{"id":"a","type":"t","online":` + strings.Repeat("9", 600) + `}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "… (600 characters) is above the maximum"},
		{"item online leading zero", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":01}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[1]"}, "must not have a leading zero (1, not 01) (in counts[1])"},
		{"item online 00", reqBody(`[{"id":"a","type":"t","online":00}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "leading zero"},
		{"item online -01", reqBody(`[{"id":"a","type":"t","online":-01}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "leading zero"},
		{"item online +1", reqBody(`[{"id":"a","type":"t","online":+1}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "must not start with +"},
		{"item online .5", reqBody(`[{"id":"a","type":"t","online":.5}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "0.5, not .5"},
		{"item online NaN", reqBody(`[{"id":"a","type":"t","online":NaN}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "NaN and Infinity are not JSON"},
		{"item online Infinity", reqBody(`[{"id":"a","type":"t","online":Infinity}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "NaN and Infinity"},
		{"item online hex", reqBody(`[{"id":"a","type":"t","online":0x10}]`), 400, apiv1.ErrMalformedJSON, []string{"counts[0]"}, "hexadecimal"},
		{"item truncated", `{"project":"proj-a","counts":[{"id":"a","type":"t","online":1},{"id":"b","ty`, 400, apiv1.ErrMalformedJSON, []string{"counts[1]"}, "truncated (in counts[1])"},
		// Names that are not ASCII: the character and its position in characters.
		{"item id not ASCII", reqBody(`[{"id":"srv-é1","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, `character 4 is "é" (U+00E9, not ASCII)`},
		{"item id Cyrillic escaped", reqBody(`[{"id":"a","type":"t","online":1},{"id":"sr\u0430v","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[1].id"}, `character 2 is "а" (U+0430, not ASCII)`},
		{"item id after an emoji", reqBody(`[{"id":"😀$","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, `character 0 is "😀" (U+1F600`},
		{"item type not UTF-8", reqBody("[{\"id\":\"a\",\"type\":\"pr\xffoc\",\"online\":1}]"), 400, apiv1.ErrInvalidItem, []string{"counts[0].type"}, "character 2 is \"\ufffd\" (U+FFFD, the replacement character: the text sent was not valid UTF-8)"},
		{"item id invisible", reqBody(`[{"id":"a\u200bb","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, `character 1 is "\u200b" (U+200B`},
		{"submission id not ASCII", strings.Replace(reqBody(`[]`), `"sub-1"`, `"sub-ü"`, 1), 400, apiv1.ErrInvalidRequest, []string{"submission_id"}, `character 4 is "ü"`},
		{"item online string", reqBody(`[{"id":"a","type":"t","online":"3"}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "must be a number, not a string"},
		{"item id number", reqBody(`[{"id":7,"type":"t","online":3}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id"}, "must be a string, not a number"},
		{"item type object", reqBody(`[{"id":"a","type":{"x":[1]},"online":3}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].type"}, "must be a string, not an object"},
		{"item unknown field", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":1,"color":"red"}]`), 400, apiv1.ErrInvalidItem, []string{"counts[1].color"}, `unknown field "color"`},
		{"item case-variant field", reqBody(`[{"ID":"a","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].ID", "counts[0].id"}, "unknown field"},
		{"item repeated field", reqBody(`[{"id":"a","type":"t","online":1,"online":2}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, "twice"},
		{"item not an object", reqBody(`[{"id":"a","type":"t","online":1},[1,[2]],3]`), 400, apiv1.ErrInvalidItem, []string{"counts[1]", "counts[2]"}, "must be an object"},
		{"duplicate id and type", reqBody(`[{"id":"a","type":"t","online":1},{"id":"a","type":"u","online":1},{"id":"a","type":"t","online":2}]`), 400, apiv1.ErrInvalidItem, []string{"counts[2]"}, "duplicate of counts[0]"},
		{"valid items with one invalid: whole request rejected", reqBody(`[{"id":"a","type":"t","online":1},{"id":"b","type":"t","online":1},{"id":"c","type":"t","online":-5},{"id":"d","type":"t","online":1}]`), 400, apiv1.ErrInvalidItem, []string{"counts[2].online"}, "nothing was written"},
		{"several invalid items all named", reqBody(`[{"id":"a$","type":"t","online":1},{"id":"b","type":"t","online":1},{"id":"c","type":"t.x","online":-5}]`), 400, apiv1.ErrInvalidItem, []string{"counts[0].id", "counts[2].type", "counts[2].online"}, "3 invalid field(s)"},
		{"top-level and item errors together", strings.Replace(reqBody(`[{"id":"a$","type":"t","online":1}]`), `"sub-1"`, `"sub$"`, 1), 400, apiv1.ErrInvalidItem, []string{"submission_id", "counts[0].id"}, ""},
		{"too many items", reqBody(six), 413, apiv1.ErrTooManyItems, []string{"counts"}, "at most 5"},
		{"body too large", reqBody(`[{"id":"` + strings.Repeat("a", 5000) + `","type":"t","online":1}]`), 413, apiv1.ErrBodyTooLarge, nil, "4096 bytes"},
		{"timestamp too old", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:00Z`, `2024-04-30T10:00:00Z`, 1), 422, apiv1.ErrOutOfWindow, []string{"timestamp"}, "oldest accepted tick is 2024-04-30T10:05:00Z"},
		{"timestamp in the future", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:00Z`, `2024-05-01T10:15:00Z`, 1), 422, apiv1.ErrOutOfWindow, []string{"timestamp"}, "in the future"},
		{"observed_at in the future", strings.Replace(reqBody(`[]`), `2024-05-01T10:05:01.5Z`, `2024-05-01T10:12:31Z`, 1), 422, apiv1.ErrOutOfWindow, []string{"observed_at"}, "would block later values"},
		{"400 wins over 422", strings.Replace(reqBody(`[{"id":"a","type":"t","online":-1}]`), `2024-05-01T10:05:00Z`, `2020-01-01T00:00:00Z`, 1), 400, apiv1.ErrInvalidItem, []string{"counts[0].online"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{}
			srv := newServer(testConfig(t, sink), newFakeTokens())
			r := post(t, srv, tokenA, strings.NewReader(tc.body))
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.raw)
			}
			if r.err.Error != tc.wantCode {
				t.Errorf("error code %q, want %q", r.err.Error, tc.wantCode)
			}
			listed := map[string]bool{}
			said := r.err.Message // the decoded messages, searched for wantMsg
			for _, fe := range r.err.Errors {
				listed[fe.Field] = true
				said += "\n" + fe.Message
				checkIndex(t, fe)
			}
			for _, f := range tc.wantFields {
				if !listed[f] {
					t.Errorf("field %q not listed in %s", f, r.raw)
				}
			}
			if tc.wantMsg != "" && !strings.Contains(said, tc.wantMsg) {
				t.Errorf("answer does not say %q: %s", tc.wantMsg, r.raw)
			}
			if n := sink.numCalls(); n != 0 {
				t.Errorf("the sink was called %d times for an invalid request", n)
			}
		})
	}
}

// checkIndex asserts a field error's index agrees with its field path: an item field
// ("counts[3].id") carries its index, a top-level one none. (An unknown top-level field is
// named as sent, whatever it looks like.)
func checkIndex(t *testing.T, fe apiv1.FieldError) {
	t.Helper()
	if fe.Index == nil {
		if isItemPath(fe.Field) {
			if !strings.Contains(fe.Message, "unknown field") {
				t.Errorf("item field %q without index", fe.Field)
			}
		}
		return
	}
	if want := fmt.Sprintf("counts[%d]", *fe.Index); fe.Field != want && !strings.HasPrefix(fe.Field, want+".") {
		t.Errorf("field %q has index %d", fe.Field, *fe.Index)
	}
}

// TestValidationListsAtMostMaxErrors: a request full of invalid items gets a bounded answer.
func TestValidationListsAtMostMaxErrors(t *testing.T) {
	sink := &fakeSink{}
	cfg := testConfig(t, sink)
	cfg.MaxItems, cfg.MaxBodyBytes = 1000, 1<<20
	srv := newServer(cfg, newFakeTokens())
	var b strings.Builder
	for i := 0; i < 300; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"n%d","type":"t","online":-1}`, i)
	}
	r := post(t, srv, tokenA, strings.NewReader(reqBody("["+b.String()+"]")))
	if r.status != http.StatusBadRequest || len(r.err.Errors) != maxListedErrors {
		t.Fatalf("status %d with %d errors, want 400 with %d", r.status, len(r.err.Errors), maxListedErrors)
	}
	if !strings.Contains(r.err.Message, "300 invalid") || !strings.Contains(r.err.Message, "first 100") {
		t.Errorf("message %q does not give the total", r.err.Message)
	}
	if sink.numCalls() != 0 {
		t.Error("the sink was called")
	}
}

// isItemPath reports whether field starts with "counts[<digits>]".
func isItemPath(field string) bool {
	rest, ok := strings.CutPrefix(field, "counts[")
	if !ok {
		return false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok || n == "" {
		return false
	}
	return strings.Trim(n, "0123456789") == ""
}
