package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// tokenBytes is the entropy of a token.
const tokenBytes = 32

// maxTokenName bounds a token's name, in bytes.
const maxTokenName = 128

// DefaultTokenName is the name of a token created without one.
const DefaultTokenName = "default"

// Token scopes (the scope field of a tokens document).
const (
	// ScopeIngest tokens submit counts and read the project (a token stored without a scope
	// field has this scope).
	ScopeIngest = "ingest"
	// ScopeRead tokens only read the project: POST /v1/counts answers them 403.
	ScopeRead = "read"
)

// CreateToken creates a bearer token for project with ScopeIngest: 32 random bytes from
// crypto/rand in unpadded base64url (43 characters). Only its sha256 hex is stored (tokens
// collection), so the returned token cannot be shown again. It also creates the project's
// document if it is missing. name labels the token in listings ("" = DefaultTokenName).
func CreateToken(ctx context.Context, db *mongo.Database, project, name string) (string, error) {
	return createToken(ctx, db, project, name, ScopeIngest)
}

// CreateReadToken is CreateToken for a read-only token (ScopeRead): it reads the project
// through the read API but cannot submit counts.
func CreateReadToken(ctx context.Context, db *mongo.Database, project, name string) (string, error) {
	return createToken(ctx, db, project, name, ScopeRead)
}

func createToken(ctx context.Context, db *mongo.Database, project, name, scope string) (string, error) {
	if err := tree.ValidateName("project", project); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	if name == "" {
		name = DefaultTokenName
	}
	if err := validateTokenName(name); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now().UTC()
	_, err := db.Collection(store.ProjectsCollection).UpdateOne(ctx,
		bson.D{{Key: "_id", Value: project}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: store.FieldCreatedAt, Value: now}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return "", fmt.Errorf("create project %q: %w", project, err)
	}
	_, err = db.Collection(store.TokensCollection).InsertOne(ctx, bson.D{
		{Key: "_id", Value: HashToken(token)},
		{Key: store.FieldProject, Value: project},
		{Key: store.FieldName, Value: name},
		{Key: store.FieldCreatedAt, Value: now},
		{Key: store.FieldScope, Value: scope},
	})
	if err != nil {
		return "", fmt.Errorf("store token: %w", err)
	}
	return token, nil
}

func validateTokenName(name string) error {
	if len(name) > maxTokenName {
		return fmt.Errorf("token name: %d bytes, at most %d allowed", len(name), maxTokenName)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("token name: not valid UTF-8")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("token name: contains the non-printable character %q", r)
		}
	}
	return nil
}

// TokenInfo describes a stored token without anything that would let it be used.
type TokenInfo struct {
	// ID is the first 12 hex digits of the token's sha256: enough to tell tokens apart.
	ID string
	// Project is the project the token belongs to.
	Project string
	// Name labels the token.
	Name string
	// Scope is ScopeIngest or ScopeRead.
	Scope string
	// CreatedAt is when the token was created.
	CreatedAt time.Time
}

// ListTokens returns project's tokens, oldest first.
func ListTokens(ctx context.Context, db *mongo.Database, project string) ([]TokenInfo, error) {
	cur, err := db.Collection(store.TokensCollection).Find(ctx,
		bson.D{{Key: store.FieldProject, Value: project}},
		options.Find().SetSort(bson.D{{Key: store.FieldCreatedAt, Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	var docs []struct {
		Hash      string    `bson:"_id"`
		Project   string    `bson:"project"`
		Name      string    `bson:"name"`
		CreatedAt time.Time `bson:"created_at"`
		Scope     string    `bson:"scope"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]TokenInfo, 0, len(docs))
	for _, d := range docs {
		id := d.Hash
		if len(id) > 12 {
			id = id[:12]
		}
		scope := d.Scope
		if scope == "" {
			scope = ScopeIngest
		}
		out = append(out, TokenInfo{ID: id, Project: d.Project, Name: d.Name, Scope: scope, CreatedAt: d.CreatedAt.UTC()})
	}
	return out, nil
}
