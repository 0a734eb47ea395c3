package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/api"
)

// CreateToken creates a token of project (creating the project if needed; read-only: it may
// only read the project) and prints it on out, alone on its line, after a note on notes that
// it is shown once.
func CreateToken(ctx context.Context, out, notes io.Writer, db *mongo.Database, project, name string, readOnly bool) error {
	create, scope := api.CreateToken, api.ScopeIngest
	if readOnly {
		create, scope = api.CreateReadToken, api.ScopeRead
	}
	token, err := create(ctx, db, project, name)
	if err != nil {
		return err
	}
	if name == "" {
		name = api.DefaultTokenName
	}
	_, _ = fmt.Fprintf(notes, "created %s token %q for project %q (id %s); it is printed once, store it now:\n",
		scope, name, project, api.HashToken(token)[:12])
	_, err = fmt.Fprintln(out, token)
	return err
}

// ListTokens prints a project's tokens (id, name, scope, creation time), never the tokens.
func ListTokens(ctx context.Context, w io.Writer, db *mongo.Database, project string) error {
	list, err := api.ListTokens(ctx, db, project)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(w, "project %q has no tokens\n", project)
		return err
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tCREATED")
	for _, t := range list {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, t.CreatedAt.Format(time.RFC3339))
	}
	_ = tw.Flush()
	_, err = io.WriteString(w, b.String())
	return err
}
