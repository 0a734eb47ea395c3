package watcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPosition runs the datadriven file testdata/position (the format of rollup's testdata:
// commands, "----", the expected output; -rewrite rewrites it). A token is a name (t1, t2…);
// every command prints the position after it:
//
//	token=SAFE pending=P held=H flush=TO running|done    (- where there is none)
//
// Commands, one per step the stream loop tells the position:
//
//	batch [token=T]        a batch added to the burst, with the stream's token after it
//	written [waiting]      the burst's parents are written; waiting: summaries wait unwritten
//	flush                  a flush of the waiting summaries starts (it stays running)
//	release                no summary waits: the held token is safe
//	done [err]             the running flush ends (err: it failed)
//	collect                the flush is finished if it is done (the loop does not wait)
//	finish                 the loop waits for the flush (it must be done here)
//	abandon                the stream ended with an error: the flush is waited for, nothing moves
func TestPosition(t *testing.T) {
	var safe bson.Raw
	p := &position{advance: func(tok bson.Raw) { safe = tok }}
	datadriven.RunTest(t, "testdata/position", func(t *testing.T, d *datadriven.TestData) string {
		var err error
		switch d.Cmd {
		case "batch":
			var tok string
			if d.HasArg("token") {
				d.ScanArgs(t, "token", &tok)
			}
			p.read(raw(tok))
		case "written":
			p.written(d.HasArg("waiting"))
		case "flush":
			p.hand(&tierFlush{finished: make(chan struct{})})
		case "release":
			p.release()
		case "done":
			if d.HasArg("err") {
				p.flush.err = errors.New("summaries failed")
			}
			close(p.flush.finished)
		case "collect":
			err = p.collect()
		case "finish":
			if p.flush != nil && !p.flush.done() {
				d.Fatalf(t, "finish would block: the flush is running")
			}
			err = p.finish()
		case "abandon":
			if p.flush != nil && !p.flush.done() {
				d.Fatalf(t, "abandon would block: the flush is running")
			}
			p.abandon()
		default:
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		out := describe(safe, p)
		if err != nil {
			out = fmt.Sprintf("error: %v\n%s", err, out)
		}
		return out
	})
}

// raw is a test token: its name's bytes (the position never reads a token).
func raw(name string) bson.Raw {
	if name == "" {
		return nil
	}
	return bson.Raw(name)
}

// describe prints the safe token and the position's tokens.
func describe(safe bson.Raw, p *position) string {
	name := func(tok bson.Raw) string {
		if tok == nil {
			return "-"
		}
		return string(tok)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "token=%s pending=%s held=%s flush=", name(safe), name(p.pending), name(p.held))
	switch {
	case p.flush == nil:
		b.WriteString("-")
	case p.flush.done():
		fmt.Fprintf(&b, "%s done", name(p.flushTo))
	default:
		fmt.Fprintf(&b, "%s running", name(p.flushTo))
	}
	return b.String() + "\n"
}
