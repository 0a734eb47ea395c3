package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sourcegraph/conc"
)

// ErrUsage marks a command-line mistake: ExitCode gives it status 2.
var ErrUsage = errors.New("usage")

// ErrForced is the result of a second interrupt: the process ends without finishing its
// shutdown.
var ErrForced = errors.New("second signal: exiting without finishing the shutdown")

// Main runs run under a context the first SIGINT or SIGTERM cancels (it says so on stderr,
// as name); a second signal exits the process at once with status 1. It returns run's exit
// status (ExitCode).
func Main(name string, stderr io.Writer, run func(context.Context) error) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var signals conc.WaitGroup
	defer signals.Wait()
	done := make(chan struct{})
	defer close(done) // before Wait: the watcher of signals returns
	signals.Go(func() {
		select {
		case sig := <-sigs:
			_, _ = fmt.Fprintf(stderr, "%s: %s: shutting down (send it again to exit at once)\n", name, sig)
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			os.Exit(ExitCode(name, stderr, ErrForced))
		case <-done:
		}
	})
	return ExitCode(name, stderr, run(ctx))
}

// ExitCode decides the process exit status in one place: 0 ok, 2 a usage error (ErrUsage in
// err's chain), 1 anything else; an error is printed on stderr after name.
func ExitCode(name string, stderr io.Writer, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		_, _ = fmt.Fprintln(stderr, name+":", err)
		return 2
	default:
		_, _ = fmt.Fprintln(stderr, name+":", err)
		return 1
	}
}
