package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// child is a rollup process (this test binary, see TestMain) whose stdout lines arrive on
// lines.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{}
	stderr *syncBuffer
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{lines: make(chan string, 16)}
	c.cmd, c.stderr, c.exited = spawn(t, func(line string) { c.lines <- line }, args...)
	return c
}

// waitLine waits for the child to print want.
func (c *child) waitLine(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if l == want {
				return
			}
		case <-c.exited:
			t.Fatalf("the child exited before printing %q: %s", want, c.stderr.String())
		case <-deadline:
			t.Fatalf("the child did not print %q within 60s", want)
		}
	}
}

// TestSecondSignalForcesExit: the first SIGINT or SIGTERM cancels the command's context (a
// graceful shutdown); a second one ends a process whose shutdown hangs at once, with exit
// status 1 and a message saying so.
func TestSecondSignalForcesExit(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startChild(t, stuckCommand)
			c.waitLine(t, "running")
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			c.waitLine(t, "shutting down")
			select {
			case <-c.exited:
				t.Fatalf("the child exited after one signal: %s", c.stderr.String())
			default:
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				t.Fatal("the child did not exit within 30s of the second signal")
			}
			if code := c.cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			for _, w := range []string{"shutting down (send it again to exit at once)", "second signal: exiting without finishing the shutdown"} {
				if !strings.Contains(c.stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, c.stderr.String())
				}
			}
		})
	}
}

// TestFirstSignalShutsDown: one SIGTERM stops a real command gracefully, exit status 0.
func TestFirstSignalShutsDown(t *testing.T) {
	c := startChild(t, "mongod", "--listen", "127.0.0.1:0", "--memory", "--log-level", "warn")
	select {
	case l := <-c.lines:
		if !strings.HasPrefix(l, "mongodb://") {
			t.Fatalf("first line %q, want the URI", l)
		}
	case <-c.exited:
		t.Fatalf("mongod exited: %s", c.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("mongod did not print its URI within 60s")
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("mongod did not exit within 60s of SIGTERM")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want 0: %s", code, c.stderr.String())
	}
}
