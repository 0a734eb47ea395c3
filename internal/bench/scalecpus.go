package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// CPU sets of the scale benchmark (--cpus): the store and each serve instance run pinned to
// CPUs of their own, so that a matrix (1 against 2 instances, the store on its own cores) can
// be repeated on any machine. A child is started through taskset (util-linux), which sets the
// affinity before it execs the program: every thread of the child inherits it, and the Go
// runtime of the child sizes GOMAXPROCS to it. (Setting the affinity of a running Go process
// would miss the threads it has already started.)

// CPUSetsSyntax is how --cpus is written, for the command's help.
const CPUSetsSyntax = `--cpus store=LIST/serve=LIST[/serve=LIST...]: entries separated by '/', each ROLE=LIST
where LIST is a CPU list as taskset -c takes it (0-3 or 0,2,4-7). store= pins the store
(rollup mongod); each serve= pins one serve instance, in order: instance i of a phase takes
the i-th serve entry, cycling when a phase has more instances than entries (one serve=4-15
entry shares those CPUs among every instance). Either role may be left out (not pinned).
CPUs must exist (/sys/devices/system/cpu/online); taskset must be installed. Not with
--inprocess (pin the whole command with taskset instead); store= not with --mongodb-uri.`

// CPUSets are the CPU lists of the store and of the serve instances ("" or none: not pinned).
type CPUSets struct {
	// Store is the store's CPU list, normalized ("0-3").
	Store string
	// Serve are the serve instances' CPU lists, normalized; instance i takes Serve[i mod len].
	Serve []string
}

// Empty reports whether nothing is pinned.
func (c CPUSets) Empty() bool { return c.Store == "" && len(c.Serve) == 0 }

// ServeFor returns the CPU list of serve instance i (from 0), "" when serve is not pinned.
func (c CPUSets) ServeFor(i int) string {
	if len(c.Serve) == 0 {
		return ""
	}
	return c.Serve[i%len(c.Serve)]
}

// String is the sets as --cpus takes them.
func (c CPUSets) String() string {
	var parts []string
	if c.Store != "" {
		parts = append(parts, "store="+c.Store)
	}
	for _, s := range c.Serve {
		parts = append(parts, "serve="+s)
	}
	return strings.Join(parts, "/")
}

// ParseCPUSets parses a --cpus spec (see CPUSetsSyntax). online is the machine's CPUs (nil:
// not checked).
func ParseCPUSets(spec string, online []int) (CPUSets, error) {
	var c CPUSets
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return c, nil
	}
	for entry := range strings.SplitSeq(spec, "/") {
		role, list, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return CPUSets{}, fmt.Errorf("--cpus: entry %q: want ROLE=LIST (store=0-3, serve=4-7)", entry)
		}
		if strings.Contains(list, "=") {
			return CPUSets{}, fmt.Errorf("--cpus: %q: separate entries with '/' (store=0-3/serve=4-7), not ','", entry)
		}
		cpus, err := ParseCPUList(list)
		if err != nil {
			return CPUSets{}, fmt.Errorf("--cpus: %s=%s: %w", role, list, err)
		}
		if online != nil {
			for _, n := range cpus {
				if !slices.Contains(online, n) {
					return CPUSets{}, fmt.Errorf("--cpus: %s=%s: CPU %d does not exist (online: %s)", role, list, n, FormatCPUList(online))
				}
			}
		}
		norm := FormatCPUList(cpus)
		switch strings.TrimSpace(role) {
		case "store":
			if c.Store != "" {
				return CPUSets{}, errors.New("--cpus: store= given twice")
			}
			c.Store = norm
		case "serve":
			c.Serve = append(c.Serve, norm)
		default:
			return CPUSets{}, fmt.Errorf("--cpus: unknown role %q (want store or serve)", role)
		}
	}
	return c, nil
}

// maxCPU bounds the CPU numbers a list may name (Linux's CONFIG_NR_CPUS maximum).
const maxCPU = 8191

// ParseCPUList parses a CPU list as taskset -c and /sys/devices/system/cpu/online write it:
// numbers and ranges (a-b, a <= b) separated by commas. It returns the CPUs sorted, each once.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty CPU list")
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("CPU range %q runs backwards", part)
			}
		}
		for n := a; n <= b; n++ {
			cpus = append(cpus, n)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number (0 to %d)", s, maxCPU)
	}
	return n, nil
}

// FormatCPUList writes sorted, distinct CPUs as a list with ranges ("0-3,6").
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// OnlineCPUs returns the machine's online CPUs (/sys/devices/system/cpu/online), whatever
// this process's own affinity.
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return cpus, nil
}

// pinned returns a launcher that runs launch's command under `taskset -c cpus` (launch itself
// when cpus is ""). taskset is the path of the taskset program.
func pinned(launch Launcher, taskset, cpus string) Launcher {
	if cpus == "" {
		return launch
	}
	return func(args ...string) *exec.Cmd {
		cmd := launch(args...)
		wrapped := exec.Command(taskset, append([]string{"-c", cpus, cmd.Path}, cmd.Args[1:]...)...)
		wrapped.Env, wrapped.Dir = cmd.Env, cmd.Dir
		return wrapped
	}
}
