package recompute

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
)

// UnknownProjectError means a project has no tree, no token and no counts: most likely a
// typo in --project.
type UnknownProjectError struct {
	// Project is the name asked for.
	Project string
	// Known are the projects the deployment knows (with a tree or a token), sorted.
	Known []string
}

// Error names the project, the known ones and the fix.
func (e *UnknownProjectError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("unknown project %q: it has no tree, no token and no counts; known projects: %s (check --project)", e.Project, known)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *UnknownProjectError) Permanent() bool { return true }

// CheckProject returns an *UnknownProjectError when project has no tree version, no projects
// document and no document in counts.
func CheckProject(ctx context.Context, db *mongo.Database, project string) error {
	trees := treedb.New(db)
	vs, err := trees.Versions(ctx, project)
	if err != nil || len(vs) > 0 {
		return err
	}
	if ok, err := store.ProjectExists(ctx, db, project); err != nil || ok {
		return err
	}
	if ok, err := store.NewCounts(db).HasDocuments(ctx, project); err != nil || ok {
		return err
	}
	withTree, err := trees.Projects(ctx)
	if err != nil {
		return err
	}
	withToken, err := store.Projects(ctx, db)
	if err != nil {
		return err
	}
	known := append(withTree, withToken...)
	slices.Sort(known)
	return &UnknownProjectError{Project: project, Known: slices.Compact(known)}
}
