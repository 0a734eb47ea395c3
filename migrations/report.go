package migrations

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Report is what one Up did, or with DryRun what it would do.
type Report struct {
	// DryRun is true when nothing was changed.
	DryRun bool
	// Applied lists the steps applied by this run in order (with DryRun: the pending steps).
	Applied []StepResult
	// Duplicates lists every (id, type, timestamp) group of the counts collection that held
	// more than one document, in key order, with the document kept and those removed.
	Duplicates []DuplicateGroup
}

// StepResult is one applied step.
type StepResult struct {
	// Version is the step's version.
	Version int
	// Name is the step's name.
	Name string
	// Took is how long the step ran (zero with DryRun).
	Took time.Duration
}

// DuplicateGroup is one set of counts documents sharing (id, type, timestamp).
type DuplicateGroup struct {
	// Key is {id, type, timestamp} as grouped (a missing field appears as null).
	Key bson.Raw
	// Kept is the whole document that stays: the newest (see the package comment).
	Kept bson.Raw
	// Removed holds the whole documents deleted (with DryRun: that would be deleted), newest
	// first, so that an operator can restore any of them.
	Removed []bson.Raw
}

// UpToDate reports whether the run found nothing to do.
func (r Report) UpToDate() bool { return len(r.Applied) == 0 && len(r.Duplicates) == 0 }

// RemovedCount is the number of documents removed (with DryRun: that would be removed).
func (r Report) RemovedCount() int {
	n := 0
	for _, g := range r.Duplicates {
		n += len(g.Removed)
	}
	return n
}

// Format writes the report for a human: the steps applied, every duplicate group with the
// kept and removed documents' key fields and values, or "up to date".
func (r Report) Format(w io.Writer) error {
	var b strings.Builder
	if r.UpToDate() {
		b.WriteString("up to date: no pending migrations\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	verb, dupVerb, countVerb := "applied", "removed", "removed"
	if r.DryRun {
		b.WriteString("dry run: nothing was changed\n")
		verb, dupVerb, countVerb = "would apply", "would remove", "to remove"
	}
	for _, s := range r.Applied {
		fmt.Fprintf(&b, "%s step %d %s", verb, s.Version, s.Name)
		switch {
		case s.Took >= time.Millisecond:
			fmt.Fprintf(&b, " (%s)", s.Took.Round(time.Millisecond))
		case s.Took > 0:
			b.WriteString(" (<1ms)")
		}
		b.WriteString("\n")
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintf(&b, "duplicate (id, type, timestamp) groups in %s: %d; documents %s: %d\n",
			CountsCollection, len(r.Duplicates), countVerb, r.RemovedCount())
		for _, g := range r.Duplicates {
			fmt.Fprintf(&b, "  %s\n", fields(g.Key, FieldID, FieldType, FieldTimestamp))
			fmt.Fprintf(&b, "    kept:    %s\n", docSummary(g.Kept))
			for _, d := range g.Removed {
				fmt.Fprintf(&b, "    %s %s\n", dupVerb+":", docSummary(d))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// docSummary renders the fields of a counts document that decide and matter in a resolution.
func docSummary(d bson.Raw) string {
	return fields(d, "_id", FieldVersion, FieldWrittenAt, FieldOnline, FieldProject, FieldSubmissionID)
}

// fields renders name=value for each named field of d; a missing field is shown as "missing".
func fields(d bson.Raw, names ...string) string {
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v, err := d.LookupErr(n)
		if err != nil {
			parts = append(parts, n+"=missing")
			continue
		}
		parts = append(parts, n+"="+valueString(v))
	}
	return strings.Join(parts, " ")
}

// valueString renders a value readably: strings bare, dates in RFC 3339 UTC, ObjectIDs in hex,
// anything else as extended JSON.
func valueString(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeString:
		return fmt.Sprintf("%q", v.StringValue())
	case bson.TypeDateTime:
		return time.UnixMilli(v.DateTime()).UTC().Format(time.RFC3339Nano)
	case bson.TypeObjectID:
		return v.ObjectID().Hex()
	case bson.TypeInt32:
		return fmt.Sprint(v.Int32())
	case bson.TypeInt64:
		return fmt.Sprint(v.Int64())
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	default:
		return v.String()
	}
}
