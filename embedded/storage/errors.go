package storage

import (
	"errors"
	"strings"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// CannotIndexParallelArrays is MongoDB's code for a compound key over two array fields.
const CannotIndexParallelArrays int32 = 171

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("storage engine closed")

// DupKeyError reports a unique index violation (E11000).
type DupKeyError struct {
	DB, Coll string
	// Index is the index name.
	Index string
	// KeyPattern is the index key, e.g. {id: 1, type: 1, timestamp: 1}.
	KeyPattern bson.D
	// KeyValue holds the duplicate values, with the same field names as KeyPattern.
	KeyValue bson.D
}

// Error returns MongoDB's message, e.g. `E11000 duplicate key error collection: db.c index:
// _id_ dup key: { _id: 1 }`.
func (e *DupKeyError) Error() string {
	var sb strings.Builder
	sb.WriteString("E11000 duplicate key error collection: ")
	sb.WriteString(e.DB)
	sb.WriteByte('.')
	sb.WriteString(e.Coll)
	sb.WriteString(" index: ")
	sb.WriteString(e.Index)
	sb.WriteString(" dup key: ")
	sb.WriteString(bsonval.Format(e.KeyValue))
	return sb.String()
}

// MongoError returns the error as a server error: code 11000 with keyPattern and keyValue.
func (e *DupKeyError) MongoError() *mongoerr.Error {
	return &mongoerr.Error{
		Code: mongoerr.DuplicateKey,
		Msg:  e.Error(),
		Extra: []mongoerr.Field{
			{Key: "keyPattern", Value: e.KeyPattern},
			{Key: "keyValue", Value: e.KeyValue},
		},
	}
}
