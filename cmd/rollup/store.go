package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gameops/rollup/store"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// storeFlags are the flags of the commands that work on a MongoDB deployment.
type storeFlags struct {
	uri      string
	database string
}

// register adds --mongodb-uri (default from ROLLUP_MONGODB_URI) and --database to fs. The URI
// may hold credentials, so its value is never printed, not even as the default in --help.
func (s *storeFlags) register(fs *flag.FlagSet) {
	s.uri = os.Getenv("ROLLUP_MONGODB_URI")
	fs.Var(secretValue{&s.uri}, "mongodb-uri", "MongoDB connection string (env ROLLUP_MONGODB_URI)")
	fs.StringVar(&s.database, "database", store.DefaultDatabase, "database name")
}

// secretValue is a string flag whose value String never reveals.
type secretValue struct{ s *string }

// String returns "" so help output shows no default.
func (v secretValue) String() string { return "" }

// Set stores the value.
func (v secretValue) Set(x string) error {
	*v.s = x
	return nil
}

// withDB connects, runs fn with the database (majority writes) and disconnects.
func (s storeFlags) withDB(ctx context.Context, fn func(db *mongo.Database) error) error {
	client, err := mongo.Connect(options.Client().ApplyURI(s.uri).SetServerSelectionTimeout(15 * time.Second))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	return fn(client.Database(s.database, options.Database().SetWriteConcern(writeconcern.Majority())))
}
