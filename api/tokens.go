package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
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

// Bounds of token ids and lifetimes.
const (
	// TokenIDLen is the length of the ids ListTokens shows: the first hex digits of the
	// token's sha256.
	TokenIDLen = 12
	// minTokenIDLen is the shortest id prefix FindToken accepts.
	minTokenIDLen = 8
	// MaxTokenLifetime bounds --expires and a rotation's grace period.
	MaxTokenLifetime = 10 * 365 * 24 * time.Hour
)

// ErrTokenNotFound is returned by FindToken, RevokeToken and RotateToken for an id that
// matches none of the project's tokens.
var ErrTokenNotFound = errors.New("no such token")

// TokenOptions describe a token to create.
type TokenOptions struct {
	// Name labels the token in listings ("" = DefaultTokenName).
	Name string
	// ReadOnly makes a ScopeRead token: it reads the project but cannot submit counts.
	ReadOnly bool
	// ExpiresIn is the token's lifetime (0: it never expires; at most MaxTokenLifetime).
	ExpiresIn time.Duration
}

// CreateToken creates a bearer token for project with ScopeIngest: 32 random bytes from
// crypto/rand in unpadded base64url (43 characters). Only its sha256 hex is stored (tokens
// collection), so the returned token cannot be shown again. It also creates the project's
// document if it is missing. name labels the token in listings ("" = DefaultTokenName).
func CreateToken(ctx context.Context, db *mongo.Database, project, name string) (string, error) {
	tok, _, err := NewToken(ctx, db, project, TokenOptions{Name: name})
	return tok, err
}

// CreateReadToken is CreateToken for a read-only token (ScopeRead): it reads the project
// through the read API but cannot submit counts.
func CreateReadToken(ctx context.Context, db *mongo.Database, project, name string) (string, error) {
	tok, _, err := NewToken(ctx, db, project, TokenOptions{Name: name, ReadOnly: true})
	return tok, err
}

// NewToken is CreateToken with options; it also returns what ListTokens would show of the
// new token.
func NewToken(ctx context.Context, db *mongo.Database, project string, o TokenOptions) (string, TokenInfo, error) {
	return newToken(ctx, db, project, o, "")
}

func newToken(ctx context.Context, db *mongo.Database, project string, o TokenOptions, rotatedFrom string) (string, TokenInfo, error) {
	if err := tree.ValidateName("project", project); err != nil {
		return "", TokenInfo{}, fmt.Errorf("create token: %w", err)
	}
	if o.Name == "" {
		o.Name = DefaultTokenName
	}
	if err := validateTokenName(o.Name); err != nil {
		return "", TokenInfo{}, fmt.Errorf("create token: %w", err)
	}
	if err := checkLifetime("expiry", o.ExpiresIn); err != nil {
		return "", TokenInfo{}, fmt.Errorf("create token: %w", err)
	}
	scope := ScopeIngest
	if o.ReadOnly {
		scope = ScopeRead
	}
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", TokenInfo{}, fmt.Errorf("create token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now().UTC().Truncate(time.Millisecond) // as stored
	_, err := db.Collection(store.ProjectsCollection).UpdateOne(ctx,
		bson.D{{Key: "_id", Value: project}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: store.FieldCreatedAt, Value: now}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return "", TokenInfo{}, fmt.Errorf("create project %q: %w", project, err)
	}
	hash := HashToken(token)
	doc := bson.D{
		{Key: "_id", Value: hash},
		{Key: store.FieldProject, Value: project},
		{Key: store.FieldName, Value: o.Name},
		{Key: store.FieldCreatedAt, Value: now},
		{Key: store.FieldScope, Value: scope},
	}
	info := TokenInfo{ID: hash[:TokenIDLen], Project: project, Name: o.Name, Scope: scope, CreatedAt: now, RotatedFrom: rotatedFrom}
	if o.ExpiresIn > 0 {
		info.ExpiresAt = now.Add(o.ExpiresIn)
		doc = append(doc, bson.E{Key: store.FieldExpiresAt, Value: info.ExpiresAt})
	}
	if rotatedFrom != "" {
		doc = append(doc, bson.E{Key: store.FieldRotatedFrom, Value: rotatedFrom})
	}
	if _, err := db.Collection(store.TokensCollection).InsertOne(ctx, doc); err != nil {
		return "", TokenInfo{}, fmt.Errorf("store token: %w", err)
	}
	return token, info, nil
}

// checkLifetime checks an expiry or a grace period.
func checkLifetime(what string, d time.Duration) error {
	if d < 0 || d > MaxTokenLifetime {
		return fmt.Errorf("token %s: want 0 to %s, got %s", what, MaxTokenLifetime, d)
	}
	return nil
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
	// ExpiresAt is when the token stops working (zero: never).
	ExpiresAt time.Time
	// RevokedAt is when the token was revoked (zero: it was not).
	RevokedAt time.Time
	// LastUsedAt is when the token last authenticated a request, to within about a minute
	// (zero: never).
	LastUsedAt time.Time
	// RotatedTo is the id of the token that replaced this one (rollup token rotate).
	RotatedTo string
	// RotatedFrom is the id of the token this one replaced.
	RotatedFrom string
}

// State says whether the token works at now: "active", "revoked" or "expired".
func (t TokenInfo) State(now time.Time) string {
	switch {
	case !t.RevokedAt.IsZero():
		return "revoked"
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return "expired"
	}
	return "active"
}

// tokenDoc is a tokens document as stored.
type tokenDoc struct {
	Hash        string    `bson:"_id"`
	Project     string    `bson:"project"`
	Name        string    `bson:"name"`
	CreatedAt   time.Time `bson:"created_at"`
	Scope       string    `bson:"scope"`
	ExpiresAt   time.Time `bson:"expires_at"`
	RevokedAt   time.Time `bson:"revoked_at"`
	LastUsedAt  time.Time `bson:"last_used_at"`
	RotatedTo   string    `bson:"rotated_to"`
	RotatedFrom string    `bson:"rotated_from"`
}

func (d tokenDoc) info() TokenInfo {
	id := d.Hash
	if len(id) > TokenIDLen {
		id = id[:TokenIDLen]
	}
	scope := d.Scope
	if scope == "" {
		scope = ScopeIngest
	}
	return TokenInfo{
		ID: id, Project: d.Project, Name: d.Name, Scope: scope, CreatedAt: d.CreatedAt.UTC(),
		ExpiresAt: utcOrZero(d.ExpiresAt), RevokedAt: utcOrZero(d.RevokedAt), LastUsedAt: utcOrZero(d.LastUsedAt),
		RotatedTo: d.RotatedTo, RotatedFrom: d.RotatedFrom,
	}
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// ListTokens returns project's tokens, oldest first, revoked and expired ones included.
func ListTokens(ctx context.Context, db *mongo.Database, project string) ([]TokenInfo, error) {
	cur, err := db.Collection(store.TokensCollection).Find(ctx,
		bson.D{{Key: store.FieldProject, Value: project}},
		options.Find().SetSort(bson.D{{Key: store.FieldCreatedAt, Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	var docs []tokenDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]TokenInfo, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.info())
	}
	return out, nil
}

// CheckTokenID checks an id as given to FindToken: 8 to 64 lowercase hex digits (list shows 12).
func CheckTokenID(id string) error {
	if len(id) < minTokenIDLen || len(id) > 64 {
		return fmt.Errorf("token id %q: want %d to 64 hex digits, as 'rollup token list' shows (%d)", id, minTokenIDLen, TokenIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("token id %q: want lowercase hex digits, as 'rollup token list' shows", id)
		}
	}
	return nil
}

// findToken returns the stored document of project's token whose id starts with id.
func findToken(ctx context.Context, db *mongo.Database, project, id string) (tokenDoc, error) {
	if err := CheckTokenID(id); err != nil {
		return tokenDoc{}, err
	}
	// Every _id is lowercase hex, so the ids starting with id are those in [id, id+"g").
	cur, err := db.Collection(store.TokensCollection).Find(ctx, bson.D{
		{Key: "_id", Value: bson.D{{Key: "$gte", Value: id}, {Key: "$lt", Value: id + "g"}}},
		{Key: store.FieldProject, Value: project},
	}, options.Find().SetLimit(2))
	if err != nil {
		return tokenDoc{}, fmt.Errorf("find token %s: %w", id, err)
	}
	var docs []tokenDoc
	if err := cur.All(ctx, &docs); err != nil {
		return tokenDoc{}, fmt.Errorf("find token %s: %w", id, err)
	}
	switch len(docs) {
	case 0:
		return tokenDoc{}, fmt.Errorf("token %s of project %q: %w (see 'rollup token list --project %s')", id, project, ErrTokenNotFound, project)
	case 1:
		return docs[0], nil
	}
	return tokenDoc{}, fmt.Errorf("token id %s matches several tokens of project %q: give more of its digits", id, project)
}

// FindToken returns project's token whose id (as ListTokens shows it, or a longer or
// shorter prefix of at least 8 hex digits of its sha256) is id.
func FindToken(ctx context.Context, db *mongo.Database, project, id string) (TokenInfo, error) {
	d, err := findToken(ctx, db, project, id)
	return d.info(), err
}

// RevokeToken revokes project's token id at once: every serve instance refuses it (401
// "token revoked") within TokenCacheTTL. Revoking a revoked token is an error that says when
// it was revoked; the document is kept so that the refusal can say why.
func RevokeToken(ctx context.Context, db *mongo.Database, project, id string) (TokenInfo, error) {
	d, err := findToken(ctx, db, project, id)
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke: %w", err)
	}
	if !d.RevokedAt.IsZero() {
		return d.info(), fmt.Errorf("revoke: token %s was already revoked at %s", d.Hash[:TokenIDLen], d.RevokedAt.UTC().Format(time.RFC3339))
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	res, err := db.Collection(store.TokensCollection).UpdateOne(ctx,
		bson.D{{Key: "_id", Value: d.Hash}, {Key: store.FieldRevokedAt, Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldRevokedAt, Value: now}}}})
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token %s: %w", d.Hash[:TokenIDLen], err)
	}
	if res.MatchedCount == 0 {
		return TokenInfo{}, fmt.Errorf("revoke token %s: revoked or deleted meanwhile", d.Hash[:TokenIDLen])
	}
	d.RevokedAt = now
	return d.info(), nil
}

// Rotation is the outcome of RotateToken.
type Rotation struct {
	// Token is the new token, to be shown once.
	Token string
	// New describes the new token.
	New TokenInfo
	// Old describes the replaced token, with its new ExpiresAt (the end of the grace period).
	Old TokenInfo
}

// RotateToken replaces project's token id: it creates a token with the same name and scope
// (expiring after expiresIn, 0: never) and makes the old one expire after grace (or sooner
// when it already expired sooner). A revoked or expired token cannot be rotated.
func RotateToken(ctx context.Context, db *mongo.Database, project, id string, grace, expiresIn time.Duration) (Rotation, error) {
	if err := checkLifetime("grace period", grace); err != nil {
		return Rotation{}, fmt.Errorf("rotate: %w", err)
	}
	old, err := findToken(ctx, db, project, id)
	if err != nil {
		return Rotation{}, fmt.Errorf("rotate: %w", err)
	}
	oldID := old.Hash[:TokenIDLen]
	now := time.Now().UTC().Truncate(time.Millisecond)
	switch old.info().State(now) {
	case "revoked":
		return Rotation{}, fmt.Errorf("rotate: token %s was revoked at %s; create a new one with 'rollup token create'", oldID, old.RevokedAt.UTC().Format(time.RFC3339))
	case "expired":
		return Rotation{}, fmt.Errorf("rotate: token %s expired at %s; create a new one with 'rollup token create'", oldID, old.ExpiresAt.UTC().Format(time.RFC3339))
	}
	tok, info, err := newToken(ctx, db, project, TokenOptions{Name: old.Name, ReadOnly: old.Scope == ScopeRead, ExpiresIn: expiresIn}, oldID)
	if err != nil {
		return Rotation{}, fmt.Errorf("rotate: %w", err)
	}
	end := now.Add(grace)
	if !old.ExpiresAt.IsZero() && old.ExpiresAt.Before(end) {
		end = old.ExpiresAt
	}
	res, err := db.Collection(store.TokensCollection).UpdateOne(ctx,
		bson.D{{Key: "_id", Value: old.Hash}, {Key: store.FieldRevokedAt, Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldExpiresAt, Value: end}, {Key: store.FieldRotatedTo, Value: info.ID}}}})
	if err == nil && res.MatchedCount == 0 {
		err = fmt.Errorf("token %s was revoked or deleted meanwhile", oldID)
	}
	if err != nil {
		// Take the new token back (best effort) so that a failed rotation leaves one token.
		_, _ = db.Collection(store.TokensCollection).DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: HashToken(tok)}})
		return Rotation{}, fmt.Errorf("rotate: expire token %s: %w", oldID, err)
	}
	old.ExpiresAt, old.RotatedTo = end, info.ID
	return Rotation{Token: tok, New: info, Old: old.info()}, nil
}
