package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/tree"
)

// maxListedErrors bounds the errors listed in one answer; the message gives the total.
const maxListedErrors = 100

// limits are the validation parameters of a Server.
type limits struct {
	maxItems   int
	maxOnline  int64
	tick       time.Duration
	lateWindow time.Duration
	futureSkew time.Duration
}

// submission is a valid request, ready for the Sink.
type submission struct {
	project      string
	submissionID string
	timestamp    time.Time
	version      int64
	items        []bulk.Item
	// mismatch holds, by item index, why an item was refused on its own by checkLeaves (its
	// id is in the project's tree at the tick with another type): nothing is written for it
	// and its status is rejected. Nil when every item goes to the Sink.
	mismatch map[int]string
}

// rfc3339Example shows the accepted date-time form in messages.
const rfc3339Example = "2024-05-01T10:05:00Z"

// validate checks every value of a parsed request against lim at server time now: 400 with
// every invalid field (item errors carry their index), then 422 for timestamps outside the
// window. Nothing is partially accepted. The submission is built in (and returned as) into,
// which is overwritten; its items reuse into's array when it is large enough (a Sink keeps
// nothing of them after Submit returns).
func validate(raw *rawRequest, lim limits, now time.Time, into *submission) (*submission, *httpError) {
	var top, items errorList
	sub := into
	reuse := into.items[:0]
	*sub = submission{}

	sub.project = top.name("project", raw.project)
	sub.submissionID = top.name("submission_id", raw.submissionID)
	var tsOK bool
	sub.timestamp, tsOK = top.timestamp(raw.timestamp, lim.tick)
	observed, obsOK := top.observedAt(raw.observedAt, now)
	sub.version = observed.UnixNano()

	if !raw.hasCounts {
		top.add("counts", "required (an array of {id, type, online}; it may be empty)")
	}
	sub.items = reuse
	if cap(reuse) < len(raw.counts) {
		sub.items = make([]bulk.Item, 0, len(raw.counts))
	}
	// Duplicates: the first index of each (id, type), in a map for large requests.
	var dupBuf [smallDupScan]dupKey
	small := dupBuf[:0]
	var firstAt map[[2]string]int
	if len(raw.counts) > smallDupScan {
		firstAt = make(map[[2]string]int, len(raw.counts))
	}
	for i, c := range raw.counts {
		items = append(items, c.problems...)
		if c.notObj {
			continue
		}
		it, keyOK := items.item(i, &raw.counts[i], lim.maxOnline)
		if keyOK {
			var j int
			var dup bool
			if firstAt == nil {
				if j, dup = findDup(small, it.ID, it.Type); !dup {
					small = append(small, dupKey{id: it.ID, typ: it.Type, index: i})
				}
			} else {
				k := [2]string{it.ID, it.Type}
				if j, dup = firstAt[k]; !dup {
					firstAt[k] = i
				}
			}
			if dup {
				index := i
				items = append(items, apiv1.FieldError{Index: &index, Field: fmt.Sprintf("counts[%d]", i),
					Message: fmt.Sprintf("duplicate of counts[%d]: same id and type (send one count per id and type)", j)})
			}
		}
		it.Timestamp = sub.timestamp
		it.Project = sub.project
		it.Version = sub.version
		it.SubmissionID = sub.submissionID
		sub.items = append(sub.items, it)
	}
	if herr := invalidRequest(top, items); herr != nil {
		return nil, herr
	}
	// The window (422): only for well-formed requests.
	if herr := outOfWindow(sub.timestamp, tsOK, observed, obsOK, lim, now); herr != nil {
		return nil, herr
	}
	return sub, nil
}

// errorList collects the field errors of a request in the order they are found.
type errorList []apiv1.FieldError

// add appends the error of field, its message formatted from format and args.
func (l *errorList) add(field, format string, args ...any) {
	*l = append(*l, apiv1.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// addItem appends the error of field of the item at index i (counts[i].field).
func (l *errorList) addItem(i int, field, format string, args ...any) {
	index := i
	*l = append(*l, apiv1.FieldError{Index: &index, Field: fmt.Sprintf("counts[%d].%s", i, field), Message: fmt.Sprintf(format, args...)})
}

// name checks the required name field (project, submission_id) and returns its value, also
// when it is invalid (the error is listed).
func (l *errorList) name(field string, v optString) string {
	if !v.ok {
		l.add(field, "required")
		return ""
	}
	if err := tree.ValidateName(field, v.v); err != nil {
		l.add(field, "%s", reason(err))
	}
	return v.v
}

// timestamp checks the required timestamp: an RFC 3339 date-time at the start of a tick.
// ok is false (and the time zero) when it is not.
func (l *errorList) timestamp(v optString, tick time.Duration) (ts time.Time, ok bool) {
	if !v.ok {
		l.add("timestamp", "required")
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, v.v)
	if err != nil {
		l.add("timestamp", "must be an RFC 3339 date-time such as %s", rfc3339Example)
		return time.Time{}, false
	}
	al := tree.AlignTick(ts, tick)
	if !al.Equal(ts) {
		l.add("timestamp", "%s is not the start of a %s tick; the tick it falls in starts at %s",
			v.v, tick, al.Format(time.RFC3339))
		return time.Time{}, false
	}
	return al, true
}

// observedAt checks the optional observed_at, the version of the write: an RFC 3339
// date-time within the years 1970–2200. Absent or invalid, the version is now and ok false.
func (l *errorList) observedAt(v optString, now time.Time) (observed time.Time, ok bool) {
	if !v.ok {
		return now, false
	}
	ts, err := time.Parse(time.RFC3339Nano, v.v)
	switch {
	case err != nil:
		l.add("observed_at", "must be an RFC 3339 date-time such as %s", rfc3339Example)
	case ts.Year() < 1970 || ts.Year() > 2200:
		l.add("observed_at", "year %d is outside 1970–2200", ts.Year())
	default:
		return ts, true
	}
	return now, false
}

// item checks the id, type and online of the count at index i and returns the item of its
// valid fields; keyOK is true when both its id and type are valid (it can be checked for
// duplicates). A field already listed among c's decoding problems is not listed again as
// missing.
func (l *errorList) item(i int, c *rawCount, maxOnline int64) (it bulk.Item, keyOK bool) {
	okID, okType := false, false
	switch {
	case !c.id.ok:
		if !hasProblem(c.problems, "id") {
			l.addItem(i, "id", "required")
		}
	case tree.ValidateID(c.id.v) != nil:
		l.addItem(i, "id", "%s", reason(tree.ValidateID(c.id.v)))
	default:
		it.ID, okID = c.id.v, true
	}
	switch {
	case !c.typ.ok:
		if !hasProblem(c.problems, "type") {
			l.addItem(i, "type", "required")
		}
	case tree.ValidateType(c.typ.v) != nil:
		l.addItem(i, "type", "%s", reason(tree.ValidateType(c.typ.v)))
	default:
		it.Type, okType = c.typ.v, true
	}
	if !c.hasOnl {
		if !hasProblem(c.problems, "online") {
			l.addItem(i, "online", "required")
		}
	} else if v, msg := parseOnline(c.online, maxOnline); msg != "" {
		l.addItem(i, "online", "%s", msg)
	} else {
		it.Online = v
	}
	return it, okID && okType
}

// invalidRequest is the 400 listing top's and items' errors (at most maxListedErrors), or
// nil when there are none.
func invalidRequest(top, items errorList) *httpError {
	if len(top)+len(items) == 0 {
		return nil
	}
	code := apiv1.ErrInvalidRequest
	msg := "the request is invalid; nothing was written"
	if len(items) > 0 {
		code = apiv1.ErrInvalidItem
		msg = fmt.Sprintf("%d invalid field(s) in the request; nothing was written, fix and resend the whole request", len(top)+len(items))
	}
	all := append(top, items...)
	if len(all) > maxListedErrors {
		msg += fmt.Sprintf(" (the first %d are listed)", maxListedErrors)
		all = all[:maxListedErrors]
	}
	return &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{Error: code, Message: msg, Errors: all}}
}

// outOfWindow is the 422 of a well-formed request whose timestamp (when tsOK) is older than
// the late-data window or ahead of the allowed clock skew, or whose observed_at (when obsOK)
// is ahead of it; nil when both are inside.
func outOfWindow(ts time.Time, tsOK bool, observed time.Time, obsOK bool, lim limits, now time.Time) *httpError {
	var window []apiv1.FieldError
	if tsOK {
		oldest := tree.AlignTick(now.Add(-lim.lateWindow), lim.tick)
		switch {
		case ts.Before(oldest):
			window = append(window, apiv1.FieldError{Field: "timestamp", Message: fmt.Sprintf(
				"%s is older than the late-data window (%s): the oldest accepted tick is %s",
				ts.Format(time.RFC3339), lim.lateWindow, oldest.Format(time.RFC3339))})
		case ts.After(now.Add(lim.futureSkew)):
			window = append(window, apiv1.FieldError{Field: "timestamp", Message: fmt.Sprintf(
				"%s is in the future (server time %s, allowed clock skew %s); check the agent's clock",
				ts.Format(time.RFC3339), now.UTC().Format(time.RFC3339), lim.futureSkew)})
		}
	}
	if obsOK && observed.After(now.Add(lim.futureSkew)) {
		window = append(window, apiv1.FieldError{Field: "observed_at", Message: fmt.Sprintf(
			"%s is in the future (server time %s, allowed clock skew %s); it is the version of the write and would block later values",
			observed.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339), lim.futureSkew)})
	}
	if len(window) == 0 {
		return nil
	}
	return &httpError{status: http.StatusUnprocessableEntity, body: apiv1.ErrorResponse{
		Error: apiv1.ErrOutOfWindow, Message: "outside the accepted time window; nothing was written", Errors: window,
	}}
}

// reason is the part of a tree name error that says what is wrong (the field is named apart).
func reason(err error) string {
	var ne *tree.NameError
	if errors.As(err, &ne) {
		return ne.Reason
	}
	return err.Error()
}

func hasProblem(ps []apiv1.FieldError, field string) bool {
	for _, p := range ps {
		if strings.HasSuffix(p.Field, "."+field) {
			return true
		}
	}
	return false
}

// smallDupScan is the item count up to which duplicates are found by comparing with the
// earlier items instead of through a map (cheaper for an agent's few leaves).
const smallDupScan = 32

// dupKey is an item's (id, type) and its index in the request.
type dupKey struct {
	id, typ string
	index   int
}

// findDup returns the index of the key of keys equal to (id, typ).
func findDup(keys []dupKey, id, typ string) (int, bool) {
	for _, k := range keys {
		if k.id == id && k.typ == typ {
			return k.index, true
		}
	}
	return 0, false
}
