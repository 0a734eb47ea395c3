package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/gameops/rollup/migrations"
)

// storeFlags are the flags of the commands that work on a MongoDB deployment.
type storeFlags struct {
	uri      string
	database string
}

// register adds --mongodb-uri (default from ROLLUP_MONGODB_URI) and --database to fs.
func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.uri, "mongodb-uri", os.Getenv("ROLLUP_MONGODB_URI"), "MongoDB connection string (env ROLLUP_MONGODB_URI)")
	fs.StringVar(&s.database, "database", migrations.DefaultDatabase, "database name")
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
