package storage

import (
	"fmt"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"
)

// Defaults for Options.
const (
	DefaultCompactAfterBytes int64 = 64 << 20
	DefaultOplogMaxBytes     int64 = 256 << 20
	// MaxDocumentSize is MongoDB's BSON document size limit.
	MaxDocumentSize = 16 << 20
)

// Options configure an Engine.
type Options struct {
	// Dir is the data directory; "" keeps everything in memory (nothing persists).
	Dir string
	// Logger receives warnings (torn log tails) and compaction info; nil = zap.NewNop().
	Logger *zap.Logger
	// CompactAfterBytes is the log size that triggers a snapshot and log truncation; 0 = 64 MiB.
	CompactAfterBytes int64
	// OplogMaxBytes bounds the retained oplog (approximate bytes of entries); 0 = 256 MiB.
	OplogMaxBytes int64
	// OplogMaxAge drops entries older than this; 0 = no age limit.
	OplogMaxAge time.Duration
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// NoSync skips fsync (benchmarks only); false = fsync before a Write returns.
	NoSync bool
}

// OpTime orders mutations: {T: unix seconds, I: increment}. It strictly increases with every
// mutation, also across restarts.
type OpTime = bson.Timestamp

// Doc is a stored document. It is immutable once stored: never mutate D or Raw.
type Doc struct {
	// Raw is the document's BSON encoding; "_id" is its first field. A stored document is
	// kept only encoded (pointer-free bytes): a decoded copy would cost about twice the memory
	// and many objects for the garbage collector to trace (see D).
	Raw bson.Raw

	idKey []byte // bsonval.KeyOf(_id)
}

// D returns the document decoded, a fresh copy the caller owns.
func (d *Doc) D() bson.D {
	dd, err := bsonval.Decode(d.Raw)
	if err != nil {
		// Raw was encoded by newDoc or checked by docFromRaw: it always decodes.
		panic(fmt.Sprintf("storage: a stored document does not decode: %v", err))
	}
	return dd
}

// Fields returns the top-level fields of the document named in fields, decoded (see
// bsonval.DecodeFields), a fresh copy the caller owns: cheaper than D for a filter that reads a
// few fields of a large document.
func (d *Doc) Fields(fields []string) bson.D {
	dd, err := bsonval.DecodeFields(d.Raw, fields)
	if err != nil {
		panic(fmt.Sprintf("storage: a stored document does not decode: %v", err))
	}
	return dd
}

// ID returns the document's _id (nil for a Doc that was not stored).
func (d *Doc) ID() any {
	e, err := bsoncore.Document(d.Raw).IndexErr(0)
	if err != nil {
		return nil
	}
	v, err := bsonval.DecodeValue(e.Value())
	if err != nil {
		panic(fmt.Sprintf("storage: a stored document's _id does not decode: %v", err))
	}
	return v
}

// IndexSpec describes an index.
type IndexSpec struct {
	Name string
	// Key is the key pattern, e.g. {id: 1, type: 1, timestamp: 1}; values are 1 or -1.
	Key    bson.D
	Unique bool
	// TTL marks a TTL index (single-field): a document whose indexed field holds a date (for
	// an array, any date of it) older than ExpireAfterSeconds is deleted by the server's TTL
	// monitor (see Writer.DeleteExpired).
	TTL                bool
	ExpireAfterSeconds int64
	// Background is the background option given at creation: it changes nothing since
	// MongoDB 4.2, but listIndexes shows it as given.
	Background bool
}

// CollectionInfo describes a collection.
type CollectionInfo struct {
	DB, Name string
	// UUID is the collection's UUID (binary subtype 4).
	UUID bson.Binary
	// Indexes lists the indexes, _id_ first.
	Indexes []IndexSpec
	// Count is the number of documents.
	Count int
	// Size is the total BSON size of the documents.
	Size int64
	// Options are the collection's options (see CollMod).
	Options CollOptions
}

// DatabaseInfo describes a database (one that has at least one collection).
type DatabaseInfo struct {
	Name       string
	SizeOnDisk int64
	Empty      bool
}

// UpdateDesc describes an update for change-stream "update" events.
type UpdateDesc struct {
	UpdatedFields   bson.D
	RemovedFields   []string
	TruncatedArrays []TruncatedArray
	// DottedPaths: the disambiguatedPaths of paths through a field name holding a dot (path
	// -> components, array indices as int32), which cannot be recovered from the path.
	DottedPaths bson.D
}

// TruncatedArray is an array an update shortened to NewSize elements.
type TruncatedArray struct {
	Field   string
	NewSize int32
}

// Oplog operation names (Entry.Op).
const (
	OpInsert        = "insert"
	OpUpdate        = "update"
	OpReplace       = "replace"
	OpDelete        = "delete"
	OpDrop          = "drop"
	OpDropDatabase  = "dropDatabase"
	OpCreate        = "create"
	OpCreateIndexes = "createIndexes"
	OpDropIndexes   = "dropIndexes"
	// OpRename renames DB.Coll (Entry.Rename).
	OpRename = "rename"
	// OpCollMod changes a collection's options: Entry.Index, when set, is an index with its
	// new options (a TTL index's expireAfterSeconds); Entry.Options, when set, the
	// collection's options.
	OpCollMod = "collMod"
)

// Rename is a rename's target, and the UUID of the collection it replaced (zero when the
// target did not exist).
type Rename struct {
	To         Namespace
	DropTarget bson.Binary
}

// OptionsChange is the options a collection was created with (New), or a collMod's new and
// previous options.
type OptionsChange struct {
	New, Old CollOptions
}

// Namespace names a collection.
type Namespace struct {
	DB, Coll string
}

// CollOptions are the collection options CollMod changes.
type CollOptions struct {
	// PreAndPostImages is MongoDB's changeStreamPreAndPostImages.enabled: updates, replaces
	// and deletes keep the document's pre-image in their oplog entry (Entry.Pre), which also
	// makes an update's post-image available to change streams.
	PreAndPostImages bool
}

// Entry is one oplog entry: one mutation, in commit order.
type Entry struct {
	TS   OpTime
	Wall time.Time
	// Op is one of the Op* constants.
	Op       string
	DB, Coll string
	// DocKey is {_id: ...} for document operations.
	DocKey bson.D
	// Doc is the post-image for insert, update and replace.
	Doc bson.D
	// Update describes an update (Op == "update").
	Update *UpdateDesc
	// UUID is the collection's UUID (zero for dropDatabase).
	UUID bson.Binary
	// Index is the created or dropped index for createIndexes and dropIndexes.
	Index *IndexSpec
	// Pre is the document before an update, replace or delete of a collection with
	// PreAndPostImages enabled; nil otherwise.
	Pre bson.D
	// Rename describes a rename.
	Rename *Rename
	// Options are the options of a create or a collMod that set them.
	Options *OptionsChange

	raw bson.Raw // Doc's encoding
}

// DocRaw returns Doc's encoding as the oplog holds it (nil when the entry has none). The
// bytes are shared: do not modify them.
func (e *Entry) DocRaw() bson.Raw { return e.raw }
