package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/store"
)

// storeFlags are the flags of the commands that work on a MongoDB deployment.
type storeFlags struct {
	uri      string
	database string
}

// register adds --mongodb-uri and --database to fs. --help never shows the URI of the
// environment (it may hold credentials): defaults are the flags' own.
func (s *storeFlags) register(fs *settings.FlagSet) {
	fs.StringVar(&s.uri, "mongodb-uri", "", "MongoDB connection string")
	fs.StringVar(&s.database, "database", store.DefaultDatabase, "database name")
}

// required checks that a valid database name and MongoDB URI were given in fs; noURI is the
// message when the URI is missing (what needs the deployment, and what to do instead). A bad
// value's error names the setting and where it came from (never the value: a URI may hold a
// password), as serve's do.
func (s storeFlags) required(fs *settings.FlagSet, noURI string) error {
	switch {
	case s.uri == "" && s.database != "":
		return errors.New(noURI)
	case s.database == "":
		return fs.Errorf("database", "must not be empty")
	}
	if err := mongoconn.CheckURI(s.uri); err != nil {
		return fs.Errorf("mongodb-uri", "%w", err)
	}
	if _, err := connstring.ParseAndValidate(s.uri); err != nil {
		return fs.Errorf("mongodb-uri", "the driver refuses it: %s", driverURIError(err, s.uri))
	}
	return nil
}

// driverURIError is the driver's complaint about uri, unless it quotes the URI's user info
// (a password must never reach a log or a terminal).
func driverURIError(err error, uri string) string {
	msg := err.Error()
	_, rest, _ := strings.Cut(uri, "://")
	if user, _, ok := strings.Cut(rest, "@"); ok && user != "" && strings.Contains(msg, user) {
		return "(its message quotes the user info, not shown)"
	}
	if _, pw, ok := strings.Cut(strings.SplitN(rest, "@", 2)[0], ":"); ok && pw != "" && strings.Contains(msg, pw) {
		return "(its message quotes the user info, not shown)"
	}
	return msg
}

// withDB connects, runs fn with the database (durable writes) and disconnects.
func (s storeFlags) withDB(ctx context.Context, fn func(db *mongo.Database) error) error {
	return mongoconn.WithDatabase(ctx, s.uri, s.database, fn)
}

// parseTime reads the time flag name: RFC 3339 (fractions of a second allowed), UTC kept
// as given. The error shows the expected form, never Go's layout string.
func parseTime(name, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339, like 2026-11-21T18:05:00Z", name, value)
	}
	return t, nil
}
