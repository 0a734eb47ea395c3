package migrations

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// Report is what one Up did, or with DryRun what it would do.
type Report struct {
	// DryRun is true when nothing was changed.
	DryRun bool
	// Applied lists the steps applied by this run in order (with DryRun: the pending steps).
	Applied []StepResult
	// Repaired lists the applied steps run again because an index they build had drifted
	// (with DryRun: that would be run again).
	Repaired []Repair
	// Dropped lists the indexes dropped because they had another definition than rollup's
	// (with DryRun: that would be dropped); the step that owns each built it again.
	Dropped []DroppedIndex
	// Duplicates lists every (id, type, timestamp) group of the counts collection that held
	// more than one document, in key order, with the document kept and those removed.
	Duplicates []DuplicateGroup
}

// Repair is an applied step run again to repair the drift of its indexes.
type Repair struct {
	// Step is the step run.
	Step StepResult
	// Drift is what was wrong before.
	Drift []store.Drift
}

// DroppedIndex is an index dropped to be rebuilt with rollup's definition.
type DroppedIndex struct {
	// Collection and Name name the index.
	Collection, Name string
	// Spec is its definition before, as listIndexes returned it.
	Spec bson.Raw
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
func (r Report) UpToDate() bool {
	return len(r.Applied) == 0 && len(r.Repaired) == 0 && len(r.Dropped) == 0 && len(r.Duplicates) == 0
}

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
	verb, dupVerb, countVerb, repairVerb, dropVerb := "applied", "removed", "removed", "repaired", "dropped"
	if r.DryRun {
		b.WriteString("dry run: nothing was changed\n")
		verb, dupVerb, countVerb, repairVerb, dropVerb = "would apply", "would remove", "to remove", "would repair", "would drop"
	}
	for _, rp := range r.Repaired {
		for _, d := range rp.Drift {
			fmt.Fprintf(&b, "schema drift: %s\n", d)
		}
		fmt.Fprintf(&b, "%s: ran step %d %s again%s\n", repairVerb, rp.Step.Version, rp.Step.Name, took(rp.Step.Took))
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "%s index %s on %s (its definition was %s) to build it as rollup defines it\n", dropVerb, d.Name, d.Collection, d.Spec.String())
	}
	for _, s := range r.Applied {
		fmt.Fprintf(&b, "%s step %d %s%s\n", verb, s.Version, s.Name, took(s.Took))
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintf(&b, "duplicate (id, type, timestamp) groups in %s: %d; documents %s: %d\n",
			store.CountsCollection, len(r.Duplicates), countVerb, r.RemovedCount())
		for _, g := range r.Duplicates {
			fmt.Fprintf(&b, "  %s\n", fields(g.Key, store.FieldID, store.FieldType, store.FieldTimestamp))
			fmt.Fprintf(&b, "    kept:    %s\n", docSummary(g.Kept))
			for _, d := range g.Removed {
				fmt.Fprintf(&b, "    %s %s\n", dupVerb+":", docSummary(d))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// took renders a step's duration for Format ("" for none).
func took(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf(" (%s)", d.Round(time.Millisecond))
	case d > 0:
		return " (<1ms)"
	}
	return ""
}

// docSummary renders the fields of a counts document that decide and matter in a resolution.
func docSummary(d bson.Raw) string {
	return fields(d, "_id", store.FieldVersion, store.FieldWrittenAt, store.FieldOnline, store.FieldProject, store.FieldSubmissionID)
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
