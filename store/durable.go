package store

import (
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// DurableWriteConcern is w: majority, j: true: a write acknowledged with it survives a
// failover and a crash of the primary.
func DurableWriteConcern() *writeconcern.WriteConcern {
	j := true
	return &writeconcern.WriteConcern{W: "majority", Journal: &j}
}

// Durable is the collection option of the writes that must survive a failover whatever the
// database's defaults: parents, checkpoints, leases and instances (DurableWriteConcern).
func Durable() *options.CollectionOptionsBuilder {
	return options.Collection().SetWriteConcern(DurableWriteConcern())
}

// DistinctInto decodes a distinct's values into out, returning the command's error first:
// driver v2's DistinctResult.Decode ignores it and reports an undecodable empty result
// ("error decoding key arr: unexpected EOF") instead, which hides a network error from the
// retry logic.
func DistinctInto(res *mongo.DistinctResult, out any) error {
	if err := res.Err(); err != nil {
		return err
	}
	return res.Decode(out)
}
