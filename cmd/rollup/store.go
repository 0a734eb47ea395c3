package main

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/mongo"

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

// required checks that a database name and a MongoDB URI were given; noURI is the message
// when the URI is missing (what needs the deployment, and what to do instead).
func (s storeFlags) required(noURI string) error {
	switch {
	case s.database == "":
		return errors.New("--database must not be empty")
	case s.uri == "":
		return errors.New(noURI)
	}
	return nil
}

// withDB connects, runs fn with the database (durable writes) and disconnects.
func (s storeFlags) withDB(ctx context.Context, fn func(db *mongo.Database) error) error {
	return mongoconn.WithDatabase(ctx, s.uri, s.database, fn)
}
