package store

// DefaultDatabase is the database name used when none is configured.
const DefaultDatabase = "rollup"

// Collections of rollup's database. The trees and tree_nodes collections belong to
// tree/treedb.
const (
	// CountsCollection holds one document per (id, type, timestamp): a leaf's count as an
	// agent submitted it, or a parent's or root's total as the watcher computed it.
	CountsCollection = "counts"
	// TokensCollection holds per-project bearer tokens (only their sha256 hex as _id).
	TokensCollection = "tokens"
	// ProjectsCollection holds one document per project ({_id: name, created_at}).
	ProjectsCollection = "projects"
	// CheckpointsCollection holds one resume token per watcher partition: {_id: name, token,
	// cluster_time, saved_at}, plus term when a lease holder saved it.
	CheckpointsCollection = "checkpoints"
	// LeasesCollection holds one lease per watcher partition, {_id: lease id, owner, term,
	// expires_at, acquired_at}, and the term counter {_id: "term-counter", last}.
	LeasesCollection = "leases"
	// InstancesCollection holds one document per instance id: {_id, incarnation, host, pid,
	// started_at, beat, beat_at, stopped}.
	InstancesCollection = "instances"
	// MigrationsCollection records applied schema steps ({_id: version, name, applied_at}).
	MigrationsCollection = "migrations"
	// LockCollection holds the single lock document that guards a migration.
	LockCollection = "migration_lock"
)

// Field names of counts documents. A leaf document has id, type, timestamp, project, online,
// version, submission_id and written_at; a parent or root document has id, type, timestamp,
// project, online, version (its revision), children, reported, expected, tree_version,
// written_at, rollup: true, and term when a lease holder wrote it.
const (
	// FieldID is the node id (string).
	FieldID = "id"
	// FieldType is the node type (string).
	FieldType = "type"
	// FieldTimestamp is the tick start (UTC DateTime aligned to the tick).
	FieldTimestamp = "timestamp"
	// FieldProject is the project name (string).
	FieldProject = "project"
	// FieldOnline is the online count (a count: see Count).
	FieldOnline = "online"
	// FieldVersion orders a document's values: a leaf's observation time in unix
	// nanoseconds, a parent's revision.
	FieldVersion = "version"
	// FieldSubmissionID is the id of the submission that wrote a leaf (string).
	FieldSubmissionID = "submission_id"
	// FieldWrittenAt is the server time of the last write (DateTime).
	FieldWrittenAt = "written_at"
	// FieldChildren is a parent's embedded document {<childID>: {type, online, version,
	// reported, expected}}.
	FieldChildren = "children"
	// FieldReported is the number of leaves under the node that reported.
	FieldReported = "reported"
	// FieldExpected is the number of leaves under the node in the tree.
	FieldExpected = "expected"
	// FieldTreeVersion is the tree version a parent was computed with.
	FieldTreeVersion = "tree_version"
	// FieldTerm is the lease term of the watcher that last wrote a parent or a checkpoint
	// (fencing).
	FieldTerm = "term"
	// FieldRollup is true on every parent and root document, absent on leaves.
	FieldRollup = "rollup"
)

// Field names of the tokens, projects and migrations documents.
const (
	// FieldName is the name of a token or of an applied migration step.
	FieldName = "name"
	// FieldCreatedAt is the creation time of a token or a project.
	FieldCreatedAt = "created_at"
	// FieldAppliedAt is when a migration step was applied.
	FieldAppliedAt = "applied_at"
	// FieldScope is a token's scope (ScopeIngest or ScopeRead; absent means ScopeIngest).
	FieldScope = "scope"
	// FieldRevokedAt is when a token was revoked (DateTime; absent: not revoked).
	FieldRevokedAt = "revoked_at"
	// FieldLastUsedAt is when a token last authenticated a request, to within a minute
	// (DateTime; absent: never used since it was recorded).
	FieldLastUsedAt = "last_used_at"
	// FieldRotatedTo is the id (12 hex digits) of the token a rotated token was replaced by.
	FieldRotatedTo = "rotated_to"
	// FieldRotatedFrom is the id of the token a token created by a rotation replaces.
	FieldRotatedFrom = "rotated_from"
)

// fieldMongoID is every document's _id.
const fieldMongoID = "_id"

// Field names of checkpoints documents.
const (
	// FieldToken is a checkpoint's resume token (document).
	FieldToken = "token"
	// FieldClusterTime is the cluster time the token encodes (timestamp).
	FieldClusterTime = "cluster_time"
	// FieldSavedAt is when the checkpoint was saved (DateTime).
	FieldSavedAt = "saved_at"
)

// Field names of leases and instances documents (a lease's term is FieldTerm).
const (
	// FieldOwner is the instance id holding a lease.
	FieldOwner = "owner"
	// FieldExpiresAt is when a lease expires unless renewed, and when a token stops working
	// (absent: never; rotation sets it on the old token to the end of the grace period).
	FieldExpiresAt = "expires_at"
	// FieldAcquiredAt is when a lease was acquired.
	FieldAcquiredAt = "acquired_at"
	// FieldLast is the term counter's last term handed out.
	FieldLast = "last"
	// FieldIncarnation identifies the process holding an instance id.
	FieldIncarnation = "incarnation"
	// FieldHost and FieldPID name that process.
	FieldHost = "host"
	FieldPID  = "pid"
	// FieldStartedAt is when it claimed the id.
	FieldStartedAt = "started_at"
	// FieldBeat counts its heartbeats; FieldBeatAt is the time of the last one.
	FieldBeat   = "beat"
	FieldBeatAt = "beat_at"
	// FieldStopped marks an id its process released at shutdown.
	FieldStopped = "stopped"
)
