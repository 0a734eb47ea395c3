package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/internal/ops"
	"github.com/gameops/rollup/tree"
)

const submitUsage = `usage: rollup submit --url URL --project P --timestamp TS [flags] (--file counts.json | -)

Send one tick's counts to a rollup server (POST /v1/counts), for agents written in shell.
The counts are a JSON array of {"id", "type", "online"} read from --file or, with "-",
from stdin. Network errors, 408, 429 and 5xx answers are retried with backoff (same submission
id and observed-at, so a retry is always safe); other 4xx answers are not. One line per item is
printed: its index, id, type and status (applied, stale = a same-or-newer value is
already stored, or rejected). The exit status is 0 when no item was rejected, 1 otherwise.

To resend a submission from a later run of your script, pass the same --submission-id
and --observed-at as the first run.

Examples:
  echo '[{"id":"srv-1","type":"proc","online":3}]' |
    ROLLUP_TOKEN=... rollup submit --url https://rollup.example.com --project mygame --timestamp now -
  rollup submit --url http://127.0.0.1:8080 --token "$TOKEN" --project mygame \
    --timestamp 2024-05-01T10:05:00Z --observed-at 2024-05-01T10:05:02Z --file counts.json
  rollup submit --url https://rollup.internal:8443 --ca-file ca.pem --project mygame --timestamp now --file counts.json

Flags:
`

// submitConfig is the parsed command line of rollup submit.
type submitConfig struct {
	url, token, project string
	timestamp, observed string
	submissionID, file  string
	caFile              string
	tick                time.Duration
	attempts            int
	jsonOut             bool
}

func parseSubmit(e *env, args []string) (submitConfig, error) {
	var c submitConfig
	fs := e.flags("submit", submitUsage)
	fs.StringVar(&c.url, "url", "", "server base URL (http:// or https://)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate, trusted in addition to the system's (SSL_CERT_FILE replaces those)")
	fs.StringVar(&c.token, "token", "", "the project's bearer token (ROLLUP_TOKEN keeps it out of the process list)")
	fs.StringVar(&c.project, "project", "", "project name")
	fs.StringVar(&c.timestamp, "timestamp", "", `tick start, RFC 3339 (e.g. 2024-05-01T10:05:00Z), or "now" for the start of the current tick`)
	fs.StringVar(&c.observed, "observed-at", "", "when the counts were sampled, RFC 3339 (default: now); it is the version of the values")
	fs.StringVar(&c.submissionID, "submission-id", "", "submission id (default: a random one)")
	fs.StringVar(&c.file, "file", "", `file with the counts JSON array ("-" = stdin)`)
	fs.DurationVar(&c.tick, "tick", tree.DefaultTick, `the server's tick (for --timestamp now)`)
	fs.IntVar(&c.attempts, "attempts", agentclient.DefaultMaxAttempts, "attempts in all, the first included")
	fs.BoolVar(&c.jsonOut, "json", false, "print the server's JSON answer instead of one line per item")
	pos, err := fs.ParseTrailing(args, e.lookupEnv)
	switch {
	case err != nil:
		return c, err
	case len(pos) == 1 && pos[0] == "-" && c.file == "":
		c.file = "-"
	case len(pos) > 0:
		return c, fmt.Errorf("unexpected argument %q", pos[0])
	}
	switch {
	case c.url == "":
		return c, errors.New("--url is required")
	case c.token == "":
		return c, errors.New("--token (or ROLLUP_TOKEN) is required")
	case c.project == "":
		return c, errors.New("--project is required")
	case c.timestamp == "":
		return c, errors.New(`--timestamp is required (RFC 3339 or "now")`)
	case c.file == "":
		return c, errors.New(`the counts are required: --file PATH, or "-" for stdin`)
	case c.attempts < 1:
		return c, errors.New("--attempts must be at least 1")
	case c.tick <= 0:
		return c, errors.New("--tick must be positive")
	}
	return c, nil
}

// submitInput reads the submission the command line describes (stdin for "-").
func submitInput(c submitConfig, stdin io.Reader, now time.Time) (agentclient.Submission, error) {
	s := agentclient.Submission{Project: c.project, SubmissionID: c.submissionID}
	if c.timestamp == "now" {
		s.Timestamp = tree.AlignTick(now, c.tick)
	} else {
		ts, err := time.Parse(time.RFC3339Nano, c.timestamp)
		if err != nil {
			return s, fmt.Errorf("--timestamp %q: want RFC 3339, like 2026-11-21T18:05:00Z, or now", c.timestamp)
		}
		s.Timestamp = ts
	}
	s.ObservedAt = now
	if c.observed != "" {
		ts, err := parseTime("observed-at", c.observed)
		if err != nil {
			return s, err
		}
		s.ObservedAt = ts
	}
	var data []byte
	var err error
	if c.file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(c.file)
	}
	if err != nil {
		return s, fmt.Errorf("read counts: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.Counts); err != nil {
		return s, fmt.Errorf(`counts: want a JSON array of {"id", "type", "online"}: %w`, err)
	}
	if dec.More() {
		return s, errors.New("counts: unexpected data after the JSON array")
	}
	return s, nil
}

func runSubmit(ctx context.Context, e *env, args []string) error {
	return runSubmitWith(ctx, e, os.Stdin, args)
}

func runSubmitWith(ctx context.Context, e *env, stdin io.Reader, args []string) error {
	c, err := parseSubmit(e, args)
	if err != nil {
		return usageError(err)
	}
	sub, err := submitInput(c, stdin, time.Now())
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	hc, err := agentclient.NewHTTPClient(c.caFile)
	if err != nil {
		return fmt.Errorf("--ca-file: %w", err)
	}
	client := &agentclient.Client{BaseURL: c.url, Token: c.token, MaxAttempts: c.attempts, HTTP: hc}
	return ops.Submit(ctx, e.stdout, client, sub, c.jsonOut)
}
