package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/gameops/rollup/embedded/cpulist"
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
		cpus, err := cpulist.Parse(list)
		if err != nil {
			return CPUSets{}, fmt.Errorf("--cpus: %s=%s: %w", role, list, err)
		}
		if online != nil {
			for _, n := range cpus {
				if !slices.Contains(online, n) {
					return CPUSets{}, fmt.Errorf("--cpus: %s=%s: CPU %d does not exist (online: %s)", role, list, n, cpulist.Format(online))
				}
			}
		}
		norm := cpulist.Format(cpus)
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
