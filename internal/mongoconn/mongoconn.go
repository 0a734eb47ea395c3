package mongoconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gameops/rollup/store"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Database returns the database name of client with the Durable write concern.
func Database(client *mongo.Client, name string) *mongo.Database {
	return client.Database(name, options.Database().SetWriteConcern(store.DurableWriteConcern()))
}

// oneShotOptions are the client options of a one-shot command. The server monitor polls
// (a plain hello every heartbeat) instead of streaming (an awaitable hello the server holds
// open for the whole heartbeat interval, 10 s): the driver's Disconnect waits for the
// monitor's check in flight, and its signal to cancel that check is lost when it comes
// before the monitor's listener goroutine has started (mongo-driver v2.9.3,
// topology.contextDoneListener: a non-blocking send). With streaming, a command that ended
// just as a new awaitable hello went out then took 10 s longer to exit (5 runs in 300 with
// the CPU contended; see docs/testing.md); with polling the check in flight is a hello
// answered at once. A
// failover is still noticed without waiting for the next poll: a server selection that finds
// no primary asks the monitor to check at once.
func oneShotOptions(uri string) *options.ClientOptions {
	return options.Client().ApplyURI(uri).SetServerSelectionTimeout(15 * time.Second).
		SetServerMonitoringMode(options.ServerMonitoringModePoll)
}

// WithDatabase connects to uri, runs fn with the database name (Durable writes) and
// disconnects: the lifecycle of a one-shot command.
func WithDatabase(ctx context.Context, uri, name string, fn func(db *mongo.Database) error) error {
	client, err := mongo.Connect(oneShotOptions(uri))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	return fn(Database(client, name))
}

// RedactURI returns what a log may show of a MongoDB connection string: its scheme and
// hosts, without the user, password, database and options (options may carry secrets too).
// A string it cannot take apart safely is shown as "(unparsable)", never in part.
func RedactURI(uri string) string {
	if uri == "" {
		return ""
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || (scheme != "mongodb" && scheme != "mongodb+srv") {
		return "(unparsable)"
	}
	q := len(rest)
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		q = i
	}
	if at := strings.LastIndexByte(rest[:q], '@'); at >= 0 {
		rest = rest[at+1:]
	} else if strings.Contains(rest, "@") {
		return scheme + "://(unparsable)" // an '@' only after a '?': user info may hide in front
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	for _, h := range strings.Split(rest, ",") {
		if !validHostPort(h) {
			return scheme + "://(unparsable)"
		}
	}
	return scheme + "://" + rest
}

// validHostPort reports whether s looks like host[:port] (a name, an IPv4 or a bracketed IPv6
// address), so RedactURI never shows a fragment of user info as a host.
func validHostPort(s string) bool {
	host, port := s, ""
	bracketed := strings.HasPrefix(s, "[")
	if bracketed {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return false
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if port == "" {
			return false
		}
	}
	if host == "" || len(port) > 5 {
		return false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range host {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' ||
			bracketed && (c == ':' || c == '%')
		if !ok {
			return false
		}
	}
	return true
}

// CheckURI checks the shape of a connection string ("" is allowed: no deployment) without
// echoing it, since it may hold a password; the driver checks the options.
func CheckURI(uri string) error {
	if uri == "" {
		return nil
	}
	if !strings.HasPrefix(uri, "mongodb://") && !strings.HasPrefix(uri, "mongodb+srv://") {
		return errors.New(`want a connection string starting with "mongodb://" or "mongodb+srv://"`)
	}
	_, rest, _ := strings.Cut(uri, "://")
	userInfo, _, hasUser := strings.Cut(rest, "@")
	if strings.HasSuffix(RedactURI(uri), "(unparsable)") || (hasUser && strings.ContainsAny(userInfo, "/?")) {
		return errors.New("want mongodb://[user:password@]host[:port][,host[:port]...][/[database]][?options] " +
			"(escape '@', ':', '/' and '?' in the user and password as %40, %3A, %2F, %3F)")
	}
	return nil
}

// CheckDatabaseName applies MongoDB's rules for database names.
func CheckDatabaseName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) >= 64:
		return fmt.Errorf("must be shorter than 64 bytes, got %d", len(name))
	case strings.ContainsAny(name, "/\\. \"$*<>:|?\x00"):
		return fmt.Errorf("%q has a character MongoDB does not allow in database names (/\\. \"$*<>:|? or NUL)", name)
	}
	return nil
}
