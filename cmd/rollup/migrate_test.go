package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
)

func TestParseMigrate(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	tests := []parseCase[migrateConfig]{
		{args: []string{"up", "--mongodb-uri", "mongodb://h"}, want: migrateConfig{sub: "up", store: storeFlags{uri: "mongodb://h", database: "rollup"}, lockWait: migrations.DefaultLockWait, logLevel: "warn"}},
		{args: []string{"--mongodb-uri", "mongodb://h", "--database", "x", "up", "--dry-run"}, want: migrateConfig{sub: "up", store: storeFlags{uri: "mongodb://h", database: "x"}, dryRun: true, lockWait: migrations.DefaultLockWait, logLevel: "warn"}},
		{args: []string{"status", "--mongodb-uri", "mongodb://h", "--lock-wait", "0s"}, want: migrateConfig{sub: "status", store: storeFlags{uri: "mongodb://h", database: "rollup"}, logLevel: "warn"}},
		{args: []string{"up"}, wantErr: "pass --mongodb-uri"},
		{args: []string{}, wantErr: "subcommand is required"},
		{args: []string{"down", "--mongodb-uri", "mongodb://m"}, wantErr: `unknown subcommand "down"`},
		{args: []string{"status", "--dry-run", "--mongodb-uri", "mongodb://m"}, wantErr: "--dry-run is for"},
		{args: []string{"up", "--mongodb-uri", "mongodb://m", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"up", "--mongodb-uri", "mongodb://m", "--lock-wait", "-1s"}, wantErr: "must not be negative"},
		{args: []string{"up", "--mongodb-uri", "mongodb://m", "--database", ""}, wantErr: "--database"},
		{args: []string{"up", "--bogus"}, wantErr: "bogus"},
	}
	checkParse(t, parseMigrate, tests)
}

func TestRunMigrateNoURIIsUsageError(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	var out, errOut strings.Builder
	err := run(context.Background(), &env{stdout: &out, stderr: &errOut}, []string{"migrate", "up"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "rollup serve") {
		t.Fatalf("err = %v, want a usage error pointing to --mongodb-uri and rollup serve", err)
	}
	if code := exitCode(&errOut, err); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

// TestRunMigrate drives the command end to end: status, dry run over seeded duplicates, up,
// status again, and a second up.
func TestRunMigrate(t *testing.T) {
	ctx := testctx.Context(t)
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	ts := time.Date(2024, 1, 1, 0, 5, 0, 0, time.UTC)
	older, newer := bson.NewObjectID(), bson.NewObjectID()
	seed := []any{
		bson.D{{Key: "_id", Value: older}, {Key: "id", Value: "srv-1"}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: ts}, {Key: "online", Value: int64(3)}, {Key: "version", Value: int64(1)}},
		bson.D{{Key: "_id", Value: newer}, {Key: "id", Value: "srv-1"}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: ts}, {Key: "online", Value: int64(5)}, {Key: "version", Value: int64(2)}},
	}
	if _, err := db.Collection(store.CountsCollection).InsertMany(ctx, seed); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROLLUP_MONGODB_URI", srv.URI)
	migrate := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		err := run(ctx, &env{stdout: &out, stderr: &errOut}, append([]string{"migrate"}, append(args, "--database", db.Name())...))
		if err != nil {
			t.Fatalf("migrate %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"status"}, []string{"11 pending", "pending\n"}},
		{[]string{"up", "--dry-run"}, []string{"dry run", "would apply step 1", "documents to remove: 1",
			`id="srv-1" type="server" timestamp=2024-01-01T00:05:00Z`, "kept:    _id=" + newer.Hex() + " version=2",
			"would remove: _id=" + older.Hex() + " version=1 written_at=missing online=3"}},
		{[]string{"status"}, []string{"11 pending"}},
		{[]string{"up"}, []string{"applied step 1", "applied step 11", "documents removed: 1", "removed: _id=" + older.Hex()}},
		{[]string{"status"}, []string{"up to date", "applied 20"}},
		{[]string{"up"}, []string{"up to date"}},
	}
	for _, s := range steps {
		out := migrate(s.args...)
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("migrate %v: output lacks %q:\n%s", s.args, w, out)
			}
		}
	}
	n, err := db.Collection(store.CountsCollection).CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("counts = %d, %v; want the newer doc only", n, err)
	}
}

// TestMigrateDrift: `migrate status` reports an index an applied step built that was dropped
// or changed (schema drift) and says how to repair it; `migrate up` repairs it and status is
// up to date again. Seen from the command line, as an operator meets it.
func TestMigrateDrift(t *testing.T) {
	ctx := testctx.Context(t)
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	t.Setenv("ROLLUP_MONGODB_URI", srv.URI)
	migrate := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		err := run(ctx, &env{stdout: &out, stderr: &errOut}, append([]string{"migrate"}, append(args, "--database", db.Name())...))
		if err != nil {
			t.Fatalf("migrate %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	migrate("up")
	counts := db.Collection(store.CountsCollection)
	if err := counts.Indexes().DropOne(ctx, store.CountsKeyIndex); err != nil {
		t.Fatal(err)
	}
	if err := counts.Indexes().DropOne(ctx, store.CountsProjectTickIndex); err != nil {
		t.Fatal(err)
	}
	if _, err := counts.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: store.FieldProject, Value: 1}, {Key: store.FieldTimestamp, Value: -1}},
		Options: options.Index().SetName(store.CountsProjectTickIndex)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		args    []string
		want    []string
		notWant string
	}{
		{[]string{"status"}, []string{
			"schema drift: index id_1_type_1_timestamp_1 on counts is missing (one document per (id, type, timestamp)",
			"step 1 built it: run `rollup migrate up` to repair it",
			"schema drift: index project_1_timestamp_1 on counts has another definition",
			"2 indexes drifted: run 'rollup migrate up'"}, "up to date"},
		{[]string{"up", "--dry-run"}, []string{"dry run: nothing was changed", "would repair: ran step 1", "would repair: ran step 6",
			"would drop index project_1_timestamp_1 on counts"}, "up to date"},
		{[]string{"status"}, []string{"2 indexes drifted"}, "up to date"},
		{[]string{"up"}, []string{"repaired: ran step 1", "repaired: ran step 6", "dropped index project_1_timestamp_1 on counts"}, "up to date"},
		{[]string{"status"}, []string{"up to date"}, "drift"},
		{[]string{"up"}, []string{"up to date"}, "repaired"},
	} {
		out := migrate(step.args...)
		wantAll(t, fmt.Sprint("migrate ", step.args), out, step.want...)
		if strings.Contains(out, step.notWant) {
			t.Errorf("migrate %v says %q:\n%s", step.args, step.notWant, out)
		}
	}
	if err := migrations.CheckSchema(ctx, db); err != nil {
		t.Fatalf("schema after the repair: %v", err)
	}
}

// TestStoreFlagErrors: a bad --mongodb-uri or --database names the setting and its source,
// never the value, for every command on a deployment.
func TestStoreFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"migrate", "status", "--mongodb-uri", "notauri"}, nil, `--mongodb-uri (from flag): want a connection string starting with "mongodb://"`},
		{[]string{"token", "list", "--project", "p"}, map[string]string{"ROLLUP_MONGODB_URI": "postgres://u:secret@h"}, "--mongodb-uri (from environment variable ROLLUP_MONGODB_URI)"},
		{[]string{"verify", "--project", "p", "--from", "2026-11-21T18:00:00Z", "--to", "2026-11-21T18:05:00Z", "--mongodb-uri", "mongodb://u:secret@127.0.0.1:0/"}, nil, "--mongodb-uri (from flag): the driver refuses it"},
		{[]string{"retention", "show", "--mongodb-uri", "mongodb://127.0.0.1/", "--database", ""}, nil, "--database (from flag): must not be empty"},
		{[]string{"verify", "--project", "p", "--from", "yesterday", "--to", "2026-11-21T18:05:00Z", "--mongodb-uri", "mongodb://127.0.0.1/"}, nil, `--from "yesterday": want RFC 3339, like 2026-11-21T18:05:00Z`},
	} {
		var out, errb strings.Builder
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		code := runMain(&env{stdout: &out, stderr: &errb, lookupEnv: lookup}, tc.args, run)
		if code != 2 || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), "secret") {
			t.Errorf("%v: exit %d, want 2 with %q and no secret:\n%s", tc.args, code, tc.want, errb.String())
		}
	}
}
