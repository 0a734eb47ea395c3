package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ProjectExists reports whether project has a document in the projects collection (created
// with its first token).
func ProjectExists(ctx context.Context, db *mongo.Database, project string) (bool, error) {
	err := db.Collection(ProjectsCollection).FindOne(ctx, bson.D{{Key: fieldMongoID, Value: project}},
		options.FindOne().SetProjection(bson.D{{Key: fieldMongoID, Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find project %q: %w", project, err)
	}
	return true, nil
}

// Projects returns the names of the projects collection's documents, sorted.
func Projects(ctx context.Context, db *mongo.Database) ([]string, error) {
	var out []string
	if err := DistinctInto(db.Collection(ProjectsCollection).Distinct(ctx, fieldMongoID, bson.D{}), &out); err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	slices.Sort(out)
	return out, nil
}
