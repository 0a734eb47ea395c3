package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
)

// Audit is who runs a token command: each create, revoke and rotate logs one line on Log
// (level info, message "token created", "token revoked" or "token rotated") with the token's
// id, project, name, the actor and the host, never the token itself.
type Audit struct {
	Log   *zap.Logger
	Actor string // the operator (the OS user)
	Host  string
}

func (a Audit) line(msg string, t api.TokenInfo, extra ...zap.Field) {
	if a.Log == nil {
		return
	}
	fields := append([]zap.Field{
		zap.String("audit", "token"), zap.String("token_id", t.ID), zap.String("project", t.Project),
		zap.String("name", t.Name), zap.String("scope", t.Scope), zap.String("actor", a.Actor), zap.String("host", a.Host),
	}, extra...)
	if !t.ExpiresAt.IsZero() {
		fields = append(fields, zap.Time("expires_at", t.ExpiresAt))
	}
	a.Log.Info(msg, fields...)
}

// CreateToken creates a token of project (creating the project if needed) and prints it on
// out, alone on its line, after a note on notes that it is shown once.
func CreateToken(ctx context.Context, out, notes io.Writer, db *mongo.Database, project string, o api.TokenOptions, audit Audit) error {
	token, info, err := api.NewToken(ctx, db, project, o)
	if err != nil {
		return err
	}
	audit.line("token created", info)
	expiry := ""
	if !info.ExpiresAt.IsZero() {
		expiry = ", expires " + info.ExpiresAt.Format(time.RFC3339)
	}
	_, _ = fmt.Fprintf(notes, "created %s token %q for project %q (id %s%s); it is printed once, store it now:\n",
		info.Scope, info.Name, project, info.ID, expiry)
	_, err = fmt.Fprintln(out, token)
	return err
}

// RevokeToken revokes project's token id and says so on notes.
func RevokeToken(ctx context.Context, notes io.Writer, db *mongo.Database, project, id string, audit Audit) error {
	info, err := api.RevokeToken(ctx, db, project, id)
	if err != nil {
		return err
	}
	audit.line("token revoked", info, zap.Time("revoked_at", info.RevokedAt))
	_, err = fmt.Fprintf(notes, "revoked token %s (%q) of project %q: every serve instance refuses it within %s\n",
		info.ID, info.Name, project, api.MaxTokenCacheTTL+time.Second)
	return err
}

// RotateToken replaces project's token id by a new one, printed on out as CreateToken does;
// the old one keeps working for grace (notes say until when).
func RotateToken(ctx context.Context, out, notes io.Writer, db *mongo.Database, project, id string, grace, expiresIn time.Duration, audit Audit) error {
	r, err := api.RotateToken(ctx, db, project, id, grace, expiresIn)
	if err != nil {
		return err
	}
	audit.line("token rotated", r.New, zap.String("rotated_from", r.Old.ID), zap.Time("old_expires_at", r.Old.ExpiresAt), zap.Duration("grace", grace))
	_, _ = fmt.Fprintf(notes, "rotated token %s (%q) of project %q: the old token works until %s (grace %s); new token id %s, printed once, store it now:\n",
		r.Old.ID, r.Old.Name, project, r.Old.ExpiresAt.Format(time.RFC3339), grace, r.New.ID)
	_, err = fmt.Fprintln(out, r.Token)
	return err
}

// ListTokens prints a project's tokens (id, name, scope, state, creation, expiry and
// last-use times), never the tokens.
func ListTokens(ctx context.Context, w io.Writer, db *mongo.Database, project string) error {
	list, err := api.ListTokens(ctx, db, project)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(w, "project %q has no tokens\n", project)
		return err
	}
	now := time.Now()
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tSTATE\tCREATED\tEXPIRES\tLAST USED")
	for _, t := range list {
		state := t.State(now)
		if state == "revoked" {
			state += " " + t.RevokedAt.Format(time.RFC3339)
		}
		if t.RotatedTo != "" {
			state += " (rotated to " + t.RotatedTo + ")"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, state, t.CreatedAt.Format(time.RFC3339),
			timeOr(t.ExpiresAt, "never"), timeOr(t.LastUsedAt, "never"))
	}
	_ = tw.Flush()
	_, err = io.WriteString(w, b.String())
	return err
}

func timeOr(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return t.Format(time.RFC3339)
}
