package retention

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/store"
)

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		in      string
		want    Period
		str     string
		wantErr string
	}{
		{in: "14d", want: Period(14 * day), str: "14d"},
		{in: " 400d ", want: Period(400 * day), str: "400d"},
		{in: "36h", want: Period(36 * time.Hour), str: "36h0m0s"},
		{in: "48h", want: Period(2 * day), str: "2d"},
		{in: "90m", want: Period(90 * time.Minute), str: "1h30m0s"},
		{in: "forever", want: Forever, str: "forever"},
		{in: "36500d", want: MaxPeriod, str: "36500d"},
		{in: "36501d", wantErr: "want 1d to 36500d"},
		{in: "0d", wantErr: "want 1d to"},
		{in: "-3d", wantErr: "whole number of days"},
		{in: "+3d", wantErr: "whole number of days"},
		{in: "1.5d", wantErr: "whole number of days"},
		{in: "d", wantErr: "whole number of days"},
		{in: "0s", wantErr: "positive"},
		{in: "-1h", wantErr: "positive"},
		{in: "", wantErr: "want a whole number"},
		{in: "two weeks", wantErr: "want a whole number"},
		{in: "Forever", wantErr: "want a whole number"},
		{in: "9999999999999d", wantErr: "want 1d to 36500d"},
	}
	for _, tt := range tests {
		got, err := ParsePeriod(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePeriod(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParsePeriod(%q) = %v (%q), %v; want %v (%q)", tt.in, time.Duration(got), got, err, time.Duration(tt.want), tt.str)
		}
	}
}

// FuzzParsePeriod: ParsePeriod never panics, accepts only positive periods up to MaxPeriod
// (or Forever), and reads back what String writes.
func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"14d", "35d", "400d", "forever", "36h", "1h30m", "0d", "-1d", "1e9d", "99999999999999999999d", "5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeriod(s)
		if err != nil {
			return
		}
		if p != Forever && (p <= 0 || p > MaxPeriod) {
			t.Fatalf("ParsePeriod(%q) = %d, out of range", s, p)
		}
		back, err := ParsePeriod(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePeriod(%q) = %v; its String %q reads back as %v, %v", s, p, p.String(), back, err)
		}
	})
}

func TestValidate(t *testing.T) {
	l := DefaultLimits()
	d := Defaults()
	tests := []struct {
		name    string
		p       Policy
		wantErr string // "" = valid
		tier    store.Tier
	}{
		{name: "defaults", p: d},
		{name: "everything forever", p: Policy{Forever, Forever, Forever, Forever}},
		{name: "all at their minimums", p: Policy{l.Minimum(store.TierLeaves), l.Minimum(store.Tier5m), l.Minimum(store.Tier1h), l.Minimum(store.Tier1d)}},
		{name: "equal periods", p: Policy{Period(3 * day), Period(3 * day), Period(3 * day), Period(3 * day)}},
		{name: "leaves shorter than the late window", p: d.With(store.TierLeaves, Period(24*time.Hour)), wantErr: "shorter than the minimum 25h5m0s", tier: store.TierLeaves},
		{name: "5m shorter than an hour plus the late window", p: Policy{Period(25*time.Hour + 5*time.Minute), Period(25 * time.Hour), Forever, Forever},
			wantErr: "sources of the 1h tier", tier: store.Tier5m},
		{name: "1h shorter than a day plus the late window", p: Policy{Period(2 * day), Period(2 * day), Period(2 * day), Forever}, wantErr: "sources of the 1d tier", tier: store.Tier1h},
		{name: "1d shorter than its own day plus the late window", p: Policy{Period(3 * day), Period(3 * day), Period(3 * day), Period(day)}, wantErr: "its 1d buckets can change", tier: store.Tier1d},
		{name: "5m kept shorter than its leaves", p: d.With(store.Tier5m, Period(10*day)), wantErr: "shorter than the 14d kept of its sources (leaves)", tier: store.Tier5m},
		{name: "1h kept shorter than 5m", p: d.With(store.Tier1h, Period(30*day)), wantErr: "keep 1h at least 35d", tier: store.Tier1h},
		{name: "1d kept shorter than 1h", p: d.With(store.Tier1d, Period(365*day)), wantErr: "keep 1d at least 400d", tier: store.Tier1d},
		{name: "leaves forever, 5m not", p: d.With(store.TierLeaves, Forever), wantErr: "shorter than the forever kept", tier: store.Tier5m},
		{name: "unset tier", p: Policy{Leaves: Period(14 * day)}, wantErr: "no period set", tier: store.Tier5m},
	}
	for _, tt := range tests {
		err := tt.p.Validate("p", l)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var pe *PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) || pe.Tier != tt.tier || pe.Project != "p" {
			t.Errorf("%s: %v; want a *PolicyError on tier %s with %q", tt.name, err, tt.tier, tt.wantErr)
		}
	}
	// The benchmark's scaled-down periods are valid under its scaled-down late window.
	bench := Policy{Period(day), Period(2 * day), Period(10 * day), Forever}
	if err := bench.Validate("", Limits{LateWindow: time.Hour}); err != nil {
		t.Errorf("bench policy: %v", err)
	}
	if err := bench.Validate("", l); err == nil {
		t.Error("the bench policy is valid under the production late window")
	}
}

func TestHorizon(t *testing.T) {
	now := time.Date(2026, 5, 20, 13, 47, 31, 0, time.FixedZone("CEST", 2*3600))
	tests := []struct {
		tier store.Tier
		p    Period
		want time.Time
	}{
		{store.TierLeaves, Period(14 * day), time.Date(2026, 5, 6, 11, 45, 0, 0, time.UTC)},
		{store.Tier5m, Period(35 * day), time.Date(2026, 4, 15, 11, 45, 0, 0, time.UTC)},
		{store.Tier1h, Period(400 * day), time.Date(2025, 4, 15, 11, 0, 0, 0, time.UTC)},
		{store.Tier1d, Period(800 * day), time.Date(2024, 3, 11, 0, 0, 0, 0, time.UTC)},
		{store.Tier1d, Forever, time.Time{}},
	}
	for _, tt := range tests {
		if got := Horizon(tt.tier, tt.p, now); !got.Equal(tt.want) || got.Location() != time.UTC && !got.IsZero() {
			t.Errorf("Horizon(%s, %s) = %s, want %s", tt.tier, tt.p, got, tt.want)
		}
	}
}

func TestParseAssignments(t *testing.T) {
	got, err := ParseAssignments([]string{"leaves=3d", "1d=forever"})
	if err != nil || len(got) != 2 || got[store.TierLeaves] != Period(3*day) || got[store.Tier1d] != Forever {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range [][]string{nil, {"leaves"}, {"2h=3d"}, {"leaves=3"}, {"leaves=3d", "leaves=4d"}} {
		if _, err := ParseAssignments(bad); err == nil {
			t.Errorf("ParseAssignments(%q) accepted", bad)
		}
	}
}

func TestTierRelations(t *testing.T) {
	for _, tt := range []struct {
		tier          store.Tier
		bucket        time.Duration
		built, source store.Tier
	}{
		{store.TierLeaves, 5 * time.Minute, store.Tier5m, ""},
		{store.Tier5m, 5 * time.Minute, store.Tier1h, store.TierLeaves},
		{store.Tier1h, time.Hour, store.Tier1d, store.Tier5m},
		{store.Tier1d, day, "", store.Tier1h},
	} {
		b, _ := store.Built(tt.tier)
		s, _ := store.SourceOf(tt.tier)
		if store.Bucket(tt.tier) != tt.bucket || b != tt.built || s != tt.source {
			t.Errorf("%s: bucket %s built %q source %q", tt.tier, store.Bucket(tt.tier), b, s)
		}
	}
}
