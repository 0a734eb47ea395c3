package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The scale benchmark runs the store (`rollup mongod`) and every serve instance (`rollup
// serve`) as child processes by default, so their CPU time and resident memory are theirs
// alone (read from /proc). This file holds the process plumbing: starting a child and waiting
// for the line that says it is up, stopping it, and reading its counters.

// Launcher returns the command that runs `rollup args...` (cmd/rollup passes its own
// executable; tests pass a re-executed test binary).
type Launcher func(args ...string) *exec.Cmd

// child is a running rollup subprocess.
type child struct {
	name string
	cmd  *exec.Cmd
	logf *os.File
	done chan struct{} // closed once the process has exited
	err  error         // Wait's error, once done
}

// startChild runs `rollup args...`, sends its standard error to dir/name.log and returns once
// a line of its standard output starts with prefix, with the rest of that line. Later
// output is discarded.
func startChild(ctx context.Context, launch Launcher, dir, name, prefix string, args ...string) (*child, string, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, "", fmt.Errorf("%s log: %w", name, err)
	}
	cmd := launch(args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logf: logf, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				select {
				case found <- rest:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		c.err = cmd.Wait()
		close(c.done)
	}()
	t := time.NewTimer(60 * time.Second)
	defer t.Stop()
	select {
	case line := <-found:
		return c, line, nil
	case <-c.done:
		_ = logf.Close()
		return nil, "", fmt.Errorf("%s exited before it was up (%w): see %s", name, c.err, logf.Name())
	case <-t.C:
		c.stop()
		return nil, "", fmt.Errorf("%s did not say %q within 60s: see %s", name, prefix, logf.Name())
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the child to shut down (SIGTERM), kills it after 20 s, and waits for it.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = c.logf.Close()
}

// exited returns the child's exit error when it has exited (a failure of the benchmark).
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited during the benchmark (%w): see %s", c.name, c.err, c.logf.Name())
	default:
		return nil
	}
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU returns the user and system CPU time of process pid so far (0 when unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is parenthesised and may contain spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// Fields 14 and 15 (utime, stime) are at 11 and 12 after the state (field 3).
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * clockTick
}

// procMem returns the resident set size and its peak (VmRSS, VmHWM) of process pid in bytes
// (0 when unreadable).
func procMem(pid int) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}

// scrapeMetrics reads the unlabelled samples of names from a Prometheus text exposition at
// url (a missing name reads 0).
func scrapeMetrics(ctx context.Context, client *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body, names...)
}

// parseMetrics reads the unlabelled samples of names from a Prometheus text exposition.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	out := make(map[string]float64, len(names))
	for _, n := range names {
		want[n] = true
		out[n] = 0
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return out, nil
}

// waitReady polls url (a /readyz) until it answers 200, for at most wait.
func waitReady(ctx context.Context, client *http.Client, url string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %s", url, wait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
