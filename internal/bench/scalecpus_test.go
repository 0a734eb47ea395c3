package bench

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gameops/rollup/embedded/cpulist"
)

func TestParseCPUSets(t *testing.T) {
	online := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	for _, tc := range []struct {
		spec      string
		store     string
		serve     []string
		wantError string
	}{
		{spec: ""},
		{spec: "store=0-3", store: "0-3"},
		{spec: "store=0-3/serve=4-7/serve=8-11", store: "0-3", serve: []string{"4-7", "8-11"}},
		{spec: " serve = 3,1,2 / store=0 ", store: "0", serve: []string{"1-3"}},
		{spec: "serve=0,2,4-6,5", serve: []string{"0,2,4-6"}},
		{spec: "serve=15", serve: []string{"15"}},
		{spec: "store=0-3,serve=4-7", wantError: "separate entries with '/'"},
		{spec: "store", wantError: "want ROLE=LIST"},
		{spec: "cpu=1", wantError: `unknown role "cpu"`},
		{spec: "store=1/store=2", wantError: "store= given twice"},
		{spec: "serve=16", wantError: "CPU 16 does not exist (online: 0-15)"},
		{spec: "serve=3-1", wantError: "runs backwards"},
		{spec: "serve=", wantError: "empty CPU list"},
		{spec: "serve=-1", wantError: "is not a CPU number"},
		{spec: "serve=a-b", wantError: "is not a CPU number"},
		{spec: "serve=0-99999", wantError: "is not a CPU number"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseCPUSets(tc.spec, online)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("ParseCPUSets(%q) = %+v, %v; want an error with %q", tc.spec, got, err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCPUSets(%q): %v", tc.spec, err)
			}
			if got.Store != tc.store || !slices.Equal(got.Serve, tc.serve) {
				t.Fatalf("ParseCPUSets(%q) = %+v, want store %q serve %q", tc.spec, got, tc.store, tc.serve)
			}
			// The normalized form parses back to itself.
			again, err := ParseCPUSets(got.String(), online)
			if err != nil || again.String() != got.String() {
				t.Fatalf("round trip of %q: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestCPUSetsServeFor(t *testing.T) {
	c := CPUSets{Serve: []string{"4-7", "8-11"}}
	for i, want := range []string{"4-7", "8-11", "4-7", "8-11"} {
		if got := c.ServeFor(i); got != want {
			t.Errorf("ServeFor(%d) = %q, want %q", i, got, want)
		}
	}
	if got := (CPUSets{Store: "0"}).ServeFor(3); got != "" {
		t.Errorf("ServeFor without serve entries = %q, want none", got)
	}
}

func TestScaleConfigCPUs(t *testing.T) {
	base := ScaleConfig{Projects: 1, Groups: 1, Servers: 1, Processes: 1, Ticks: 1, Instances: []int{1},
		Launch: func(args ...string) *exec.Cmd { return exec.Command("true") }}
	c := base
	c.InProcess, c.CPUs = true, CPUSets{Serve: []string{"1"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not with --inprocess") {
		t.Errorf("--inprocess with --cpus: %v", err)
	}
	c = base
	c.URI, c.CPUs = "mongodb://127.0.0.1:1", CPUSets{Store: "0"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--mongodb-uri") {
		t.Errorf("--mongodb-uri with store=: %v", err)
	}
	c.CPUs = CPUSets{Serve: []string{"0"}}
	if err := c.Validate(); err != nil {
		t.Errorf("--mongodb-uri with serve=: %v", err)
	}
}

// TestPinned runs a child through pinned and reads the affinity the kernel gave it.
func TestPinned(t *testing.T) {
	ts, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset (util-linux) is not installed")
	}
	online, err := cpulist.Online()
	if err != nil {
		t.Skip(err)
	}
	cpu := cpulist.Format(online[len(online)-1:])
	launch := func(args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `grep Cpus_allowed_list /proc/self/status; echo "$@"`, "sh"}, args...)...)
	}
	out, err := pinned(launch, ts, cpu)("serve", "--x").CombinedOutput()
	if err != nil {
		t.Fatalf("pinned child: %v: %s", err, out)
	}
	if got := string(out); !strings.Contains(got, "Cpus_allowed_list:\t"+cpu+"\n") || !strings.Contains(got, "serve --x") {
		t.Fatalf("pinned child said %q, want its affinity %s and its arguments", got, cpu)
	}
	if cmd := pinned(launch, ts, "")("a"); cmd.Path != launch("a").Path {
		t.Errorf("pinned without CPUs changed the command: %v", cmd.Args)
	}
}
