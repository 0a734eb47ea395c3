package store

import (
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
