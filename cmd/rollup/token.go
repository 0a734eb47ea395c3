package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/internal/ops"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/metrics"
)

const tokenUsage = `usage: rollup token create --project P [--name N] [--read-only] [--expires DURATION] [flags]
       rollup token list --project P [flags]
       rollup token revoke --project P ID [flags]
       rollup token rotate --project P [--grace DURATION] [--expires DURATION] ID [flags]

Manage the per-project bearer tokens agents send to POST /v1/counts and dashboards send to
the read API (GET /v1/projects/...).
'create' creates the project if needed and a new token, and prints the token once on stdout:
only its sha256 is stored, so it cannot be shown again. A token may submit counts and read
the project; with --read-only it may only read it (POST /v1/counts answers 403). With
--expires it stops working after that long (401 "token expired at ...").
'list' shows a project's tokens (id = the first 12 hex digits of the token's sha256, name,
scope, state, creation, expiry and last-use times; last use is written at most once a minute),
never the tokens.
'revoke' ends token ID at once: every serve instance answers it 401 "token revoked" within 5 s.
'rotate' creates a token with the same name and scope, prints it once, and keeps token ID
working for --grace (then it expires), so agents can be moved to the new one without a gap.
Create, revoke and rotate each log one JSON audit line on stderr (token id, project, name,
actor, host; never the token). Durations are Go durations (90m, 12h) or days (30d).

Examples:
  TOKEN=$(rollup token create --project mygame --name eu-agents --expires 90d --mongodb-uri 'mongodb://db1/?replicaSet=rs0')
  rollup token create --project mygame --name dashboard --read-only --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup token list --project mygame
  rollup token rotate --project mygame --grace 24h 3f2a9c0b1d4e
  rollup token revoke --project mygame 3f2a9c0b1d4e

Flags:
`

// tokenConfig is the parsed command line of rollup token.
type tokenConfig struct {
	sub      string
	store    storeFlags
	project  string
	name     string
	readOnly bool
	expires  lifetime
	grace    lifetime
	id       string // revoke, rotate
}

// defaultGrace is how long a rotated token keeps working by default.
const defaultGrace = 24 * time.Hour

// lifetime is a duration flag that also takes whole days ("30d").
type lifetime time.Duration

func (l *lifetime) String() string { return time.Duration(*l).String() }

func (l *lifetime) Set(s string) error {
	d, err := parseLifetime(s)
	if err != nil {
		return err
	}
	*l = lifetime(d)
	return nil
}

// parseLifetime parses a Go duration or a whole number of days ("30d"), 0 to
// api.MaxTokenLifetime.
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > int(api.MaxTokenLifetime/(24*time.Hour)) {
			return 0, fmt.Errorf("want a duration such as 12h or 30d, up to %dd", int(api.MaxTokenLifetime/(24*time.Hour)))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("want a duration such as 12h or 30d: %w", err)
		}
	}
	if d < 0 || d > api.MaxTokenLifetime {
		return 0, fmt.Errorf("want 0 to %dd, got %s", int(api.MaxTokenLifetime/(24*time.Hour)), d)
	}
	return d, nil
}

// tokenSubs are the subcommands; the value says whether it takes a token id.
var tokenSubs = map[string]bool{"create": false, "list": false, "revoke": true, "rotate": true}

// parseToken parses "token <create|list|revoke|rotate> [flags] [ID]"; flags may also come
// before the subcommand.
func parseToken(e *env, args []string) (tokenConfig, error) {
	c := tokenConfig{grace: lifetime(defaultGrace)}
	fs := e.flags("token", tokenUsage)
	c.store.register(fs)
	fs.StringVar(&c.project, "project", "", "project name (1-128 bytes of A-Z a-z 0-9 _ : -)")
	fs.StringVar(&c.name, "name", "", "create: a label for the token (default \""+api.DefaultTokenName+"\")")
	fs.BoolVar(&c.readOnly, "read-only", false, "create: a token that may only read the project (the read API), not submit counts")
	fs.Var(&c.expires, "expires", "create, rotate: the new token stops working after this long (e.g. 90d; 0 = never)")
	fs.Var(&c.grace, "grace", "rotate: how long the old token keeps working (0 = it stops at once)")
	pos, err := e.parseArgs(fs, args)
	switch {
	case err != nil:
		return c, err
	case len(pos) == 0:
		fs.Usage()
		return c, errors.New("a subcommand is required: create, list, revoke or rotate")
	}
	c.sub = pos[0]
	takesID, known := tokenSubs[c.sub]
	if !known {
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want create, list, revoke or rotate", c.sub)
	}
	if takesID {
		if len(pos) < 2 {
			return c, fmt.Errorf("'token %s' needs the token's id, as 'rollup token list' shows it", c.sub)
		}
		c.id, pos = pos[1], pos[1:]
		if err := api.CheckTokenID(c.id); err != nil {
			return c, err
		}
	}
	set := func(name string) bool { return fs.Source(name) != settings.SourceDefault }
	switch {
	case len(pos) > 1:
		return c, fmt.Errorf("unexpected argument %q", pos[1])
	case c.project == "":
		return c, errors.New("--project is required")
	case c.sub != "create" && c.name != "":
		return c, errors.New("--name is for 'token create'")
	case c.sub != "create" && c.readOnly:
		return c, errors.New("--read-only is for 'token create'")
	case c.sub != "create" && c.sub != "rotate" && c.expires != 0:
		return c, errors.New("--expires is for 'token create' and 'token rotate'")
	case c.sub != "rotate" && set("grace"):
		return c, errors.New("--grace is for 'token rotate'")
	}
	return c, c.store.required(fs, "tokens live in the MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); "+
		"'rollup serve --demo' prints a demo token")
}

func runToken(ctx context.Context, e *env, args []string) error {
	c, err := parseToken(e, args)
	if err != nil {
		return usageError(err)
	}
	log, err := metrics.NewLogger("info", true, e.stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	audit := ops.Audit{Log: log.Named("audit"), Actor: actor(), Host: hostname()}
	return c.store.withDB(ctx, func(db *mongo.Database) error {
		switch c.sub {
		case "create":
			o := api.TokenOptions{Name: c.name, ReadOnly: c.readOnly, ExpiresIn: time.Duration(c.expires)}
			return ops.CreateToken(ctx, e.stdout, e.stderr, db, c.project, o, audit)
		case "revoke":
			return ops.RevokeToken(ctx, e.stderr, db, c.project, c.id, audit)
		case "rotate":
			return ops.RotateToken(ctx, e.stdout, e.stderr, db, c.project, c.id, time.Duration(c.grace), time.Duration(c.expires), audit)
		}
		return ops.ListTokens(ctx, e.stdout, db, c.project)
	})
}

// actor names the operator for audit lines: the OS user.
func actor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
