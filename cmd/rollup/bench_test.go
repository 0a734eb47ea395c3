package main

import "testing"

// TestBenchIngestCLI runs `bench ingest` end to end on a small shape with both clients: every
// answer is checked inside the run (all items applied), the report has one row per tick plus
// the total, and the command counts respect the bound.
func TestBenchIngestCLI(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool
		wantOut []string
	}{
		{"loadgen", []string{"--agents", "20", "--leaves", "5", "--ticks", "2"}, false,
			[]string{"20 agents x 5 leaves", "   1     100", "   2     100", " all     200", "1 / 1"}},
		{"large answers (chunked)", []string{"--agents", "2", "--leaves", "200", "--ticks", "1"}, false,
			[]string{"   1     400"}},
		{"agentclient", []string{"--agents", "20", "--leaves", "5", "--ticks", "1", "--client", "agentclient"}, false,
			[]string{"   1     100", "1 / 1"}},
		{"unknown client", []string{"--client", "curl"}, true, nil},
		{"zero agents", []string{"--agents", "0"}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCLI(t, append([]string{"bench", "ingest"}, tc.args...), tc.usage, tc.wantOut)
		})
	}
}

func TestBenchBaselinesCLI(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool
		wantOut []string
	}{
		{"run", []string{"--groups", "1", "--servers", "2", "--processes", "3", "--ticks", "1"}, false,
			[]string{"6 leaves", "original", "reaggregate", "rollup", "1/1 ticks"}},
		{"servers not a multiple of groups", []string{"--groups", "2", "--servers", "3"}, true, nil},
		{"zero ticks", []string{"--ticks", "0"}, true, nil},
		{"unknown flag", []string{"--nope"}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCLI(t, append([]string{"bench", "baselines"}, tc.args...), tc.usage, tc.wantOut)
		})
	}
}
