package status

import (
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	now := t0
	tr := newAt("bulk", "starting", func() time.Time { return now })
	steps := []struct {
		do   func()
		want State
	}{
		{func() {}, State{Component: "bulk", Since: t0, Reason: "starting"}},
		{func() { now = t0.Add(time.Second); tr.Ready() }, State{Component: "bulk", Ready: true, Since: t0.Add(time.Second)}},
		{func() { now = t0.Add(2 * time.Second); tr.Ready() }, State{Component: "bulk", Ready: true, Since: t0.Add(time.Second)}},
		{func() { now = t0.Add(3 * time.Second); tr.NotReady("store unreachable") }, State{Component: "bulk", Since: t0.Add(3 * time.Second), Reason: "store unreachable"}},
		{func() { now = t0.Add(4 * time.Second); tr.NotReady("not writable") }, State{Component: "bulk", Since: t0.Add(3 * time.Second), Reason: "not writable"}},
		{func() { now = t0.Add(5 * time.Second); tr.Ready() }, State{Component: "bulk", Ready: true, Since: t0.Add(5 * time.Second)}},
	}
	for i, s := range steps {
		s.do()
		if got := tr.State(); got != s.want {
			t.Fatalf("step %d: got %+v, want %+v", i, got, s.want)
		}
	}
}

func TestNilTracker(t *testing.T) {
	var tr *Tracker
	tr.Ready()
	tr.NotReady("x")
	if got := tr.State(); got != (State{}) {
		t.Fatalf("nil tracker state = %+v", got)
	}
	if got := States(nil, New("a", "starting"), nil); len(got) != 1 || got[0].Component != "a" {
		t.Fatalf("States = %+v", got)
	}
}
