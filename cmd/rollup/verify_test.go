package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// repairLine is a numbered repair step of verify's output.
var repairLine = regexp.MustCompile(`(?m)^  \d+\. (.*)$`)

// repairs returns the repair steps verify printed, in order.
func repairs(out string) []string {
	var steps []string
	for _, m := range repairLine.FindAllStringSubmatch(out, -1) {
		steps = append(steps, m[1])
	}
	return steps
}

// runRepairs runs the `rollup ...` repair commands of a verify output, in order, and returns
// the steps that are not commands (what an operator does by hand).
func (e *opsEnv) runRepairs(out string) []string {
	e.t.Helper()
	var byHand []string
	for _, step := range repairs(out) {
		args, ok := strings.CutPrefix(step, "rollup ")
		if !ok {
			byHand = append(byHand, step)
			continue
		}
		if cout, err := e.cmd(e.ctx, nil, strings.Fields(args)...); err != nil {
			e.t.Fatalf("repair %q: %v\n%s", step, err, cout)
		}
	}
	return byHand
}

// TestVerifyRepairLoop drives what an operator does: verify, run the repairs it prints, verify
// again — on a leaf stored as a double (as mongosh writes `online: 7`), a leaf with a
// fraction, a dropped unique index, duplicate keys and an unknown project. Whatever verify
// flags, the repairs it names fix; replay never loops on a document it cannot read.
func TestVerifyRepairLoop(t *testing.T) {
	setLeaf := func(e *opsEnv, i int, set bson.D) tree.Node {
		e.t.Helper()
		leaf := e.tr.Leaves()[0]
		for _, l := range e.tr.Leaves() {
			if e.reported(i, l.ID) {
				leaf = l
				break
			}
		}
		res, err := e.counts.UpdateOne(e.ctx, keyFilter(leaf.ID, leaf.Type, e.ticks[i]), bson.D{{Key: "$set", Value: set}})
		if err != nil || res.MatchedCount != 1 {
			e.t.Fatalf("update leaf %s: %v %+v", leaf.ID, err, res)
		}
		return leaf
	}
	tests := []struct {
		name string
		// damage breaks the store after a replay built correct parents; it returns what
		// verify must say.
		damage func(e *opsEnv) []string
		// repairs are the steps verify must print, in order (prefixes).
		repairs []string
		// byHand does the steps that are no command.
		byHand func(e *opsEnv)
	}{
		{
			name: "double online without a fraction",
			damage: func(e *opsEnv) []string {
				l := setLeaf(e, 1, bson.D{{Key: store.FieldOnline, Value: 7.0}})
				return []string{fmt.Sprintf("children.%s.online stored", l.ID), "expected 7: stale: the leaf has online 7 version 1"}
			},
			repairs: []string{"rollup replay --project ops"},
		},
		{
			name: "online with a fraction",
			damage: func(e *opsEnv) []string {
				l := setLeaf(e, 1, bson.D{{Key: store.FieldOnline, Value: 7.5}})
				return []string{fmt.Sprintf("invalid   %s (process) at %s: invalid leaf document: online: has type double (7.5), want a whole number",
					l.ID, e.ticks[1].Format(time.RFC3339))}
			},
			repairs: []string{"fix or delete each invalid document listed, by hand", "rollup replay --project ops"},
			byHand: func(e *opsEnv) {
				setLeaf(e, 1, bson.D{{Key: store.FieldOnline, Value: int64(7)}})
			},
		},
		{
			name: "unique index dropped",
			damage: func(e *opsEnv) []string {
				if err := e.counts.Indexes().DropOne(e.ctx, store.CountsKeyIndex); err != nil {
					e.t.Fatal(err)
				}
				return []string{"index     index id_1_type_1_timestamp_1 on counts is missing", "violations (index 1)"}
			},
			repairs: []string{"rollup migrate up"},
		},
		{
			name: "duplicate keys",
			damage: func(e *opsEnv) []string {
				if err := e.counts.Indexes().DropOne(e.ctx, store.CountsKeyIndex); err != nil {
					e.t.Fatal(err)
				}
				l := e.tr.Leaves()[0]
				for _, cand := range e.tr.Leaves() {
					if e.reported(2, cand.ID) {
						l = cand
						break
					}
				}
				// A second document of the key, newer, as an upsert race without the index
				// leaves it.
				w := store.LeafWrite{ID: l.ID, Type: l.Type, Tick: e.ticks[2], Project: opsProject, Online: 99, Version: 5, SubmissionID: "dup"}
				if _, err := e.counts.InsertOne(e.ctx, append(store.KeyFilter(store.Key{ID: l.ID, Type: l.Type, Tick: e.ticks[2]}),
					store.LeafUpdate(w, time.Now())[0].Value.(bson.D)...)); err != nil {
					e.t.Fatal(err)
				}
				return []string{fmt.Sprintf("duplicate %s (process) at %s: documents stored 2, expected 1", l.ID, e.ticks[2].Format(time.RFC3339))}
			},
			repairs: []string{"rollup migrate up", "rollup replay --project ops"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newOpsEnv(t, 2, 2, 3, 3)
			e.replay("--progress", "none")
			e.mustVerify()
			want := tc.damage(e)
			out, code := e.verify()
			if code != 1 {
				t.Fatalf("verify after the damage: exit %d:\n%s", code, out)
			}
			wantAll(t, "verify", out, want...)
			steps := repairs(out)
			if len(steps) != len(tc.repairs) {
				t.Fatalf("repairs %q, want %q:\n%s", steps, tc.repairs, out)
			}
			for i, w := range tc.repairs {
				if !strings.HasPrefix(steps[i], w) {
					t.Errorf("repair %d = %q, want %q", i+1, steps[i], w)
				}
			}
			if tc.byHand != nil {
				// Replay alone cannot fix an invalid document: it skips it (counts it)
				// and verify still names it, with the same repairs.
				rout := e.replay("--progress", "none")
				wantAll(t, "replay", rout, " 1 invalid in ")
				again, code := e.verify()
				if code != 1 || !strings.Contains(again, "violations (invalid 1)") || len(repairs(again)) != len(tc.repairs) {
					t.Fatalf("verify after replay alone: exit %d:\n%s", code, again)
				}
				tc.byHand(e)
			}
			if byHand := e.runRepairs(out); len(byHand) != 0 && tc.byHand == nil {
				t.Fatalf("steps left to do by hand: %q", byHand)
			}
			if again, code := e.verify(); code != 0 {
				t.Fatalf("verify after the repairs it printed: exit %d:\n%s", code, again)
			}
		})
	}

	t.Run("unknown project", func(t *testing.T) {
		e := newOpsEnv(t, 1, 1, 2, 1)
		e.replay("--progress", "none")
		from, to := e.ticks[0].Format(time.RFC3339), e.ticks[0].Add(tree.DefaultTick).Format(time.RFC3339)
		for _, args := range [][]string{
			{"verify", "--project", "typo", "--from", from, "--to", to},
			{"replay", "--project", "typo", "--from", from, "--to", to, "--progress", "none"},
			{"replay", "--project", "typo", "--from", from, "--to", to, "--dry-run"},
		} {
			var errOut strings.Builder
			out, err := e.cmd(e.ctx, &errOut, args...)
			code := exitCode(&errOut, err)
			if code != 1 || !strings.Contains(errOut.String(), `unknown project "typo": it has no tree, no token and no counts; known projects: ops (check --project)`) {
				t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut.String())
			}
			if strings.Contains(out, "no violations") {
				t.Errorf("%v claims no violations:\n%s", args, out)
			}
		}
		if _, code := e.verify(); code != 0 {
			t.Fatal("the known project does not verify")
		}
	})

	t.Run("orphans named", func(t *testing.T) {
		e := newOpsEnv(t, 1, 1, 2, 1)
		e.submit(leafItem("ghost-b", tree.TypeProcess, e.ticks[0], 3, 1), leafItem("ghost-a", tree.TypeProcess, e.ticks[0], 4, 1))
		e.replay("--progress", "none")
		out, code := e.verify()
		if code != 0 {
			t.Fatalf("uncounted orphans are no violation: exit %d:\n%s", code, out)
		}
		at := e.ticks[0].Format(time.RFC3339)
		wantAll(t, "verify", out, "2 orphan leaves", "orphan leaves (kept, not counted",
			"  ghost-a (process) at "+at+": online 4\n  ghost-b (process) at "+at+": online 3\n")
	})
}
