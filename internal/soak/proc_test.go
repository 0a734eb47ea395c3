package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The rollup binary the soak runs, built once per test binary (see rollupBinary) into
// buildDir, which TestMain removes.
var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// rollupBinary returns the path of a rollup binary: ROLLUP_SOAK_BINARY, or one built from
// this module, once. The built one is the product binary as shipped, without the race
// detector even when the test runs with -race: its processes are the soak's subjects, and
// race-built ones kept the machine busy for 25 CPU s under go test -race, these 14. The race
// detector holds serve and the embedded server in their own packages' tests, which run them in
// race-built test binaries; a race-built soak is ROLLUP_SOAK_BINARY set to a go build -race
// binary (docs/testing.md, "The soak's processes as shipped, again").
func rollupBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("ROLLUP_SOAK_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "rollup-soak-bin-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "rollup")
		cmd := exec.Command(goTool(), "build", "-o", buildPath, "github.com/gameops/rollup/cmd/rollup")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build rollup: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// goTool is the go command: the one on PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// proc is one rollup process of a seed.
type proc struct {
	name   string
	cmd    *exec.Cmd
	output *tail       // stdout and stderr, the last 64 KiB
	lines  chan string // stdout lines (the first ones; later ones are dropped)
	done   chan struct{}
	state  *os.ProcessState
	// stopping is set before the test stops the process on purpose.
	stopping atomic.Bool
}

// startProc runs `rollup args...`.
func startProc(bin, name string, args ...string) (*proc, error) {
	p := &proc{name: name, output: &tail{max: 64 << 10}, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.output
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.output.Write([]byte(line + "\n"))
			select {
			case p.lines <- line:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// waitLine waits for a stdout line starting with prefix and returns the rest of it.
func (p *proc) waitLine(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case line := <-p.lines:
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return rest, nil
			}
		case <-p.done:
			return "", fmt.Errorf("%s exited (%v) before printing %q:\n%s", p.name, p.state, prefix, p.output.String())
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not print %q: %w", p.name, prefix, ctx.Err())
		}
	}
}

// stop sends sig (SIGKILL or SIGTERM) and waits for the process to end (SIGKILL after
// grace when it has not).
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// bindFailed reports whether a process's output says it could not bind.
func bindFailed(output string) bool {
	return strings.Contains(output, "address already in use")
}
