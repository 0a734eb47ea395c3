package migrations

// Schema constants shared by every package that reads or writes rollup's database.
const (
	// DefaultDatabase is the database name used when none is configured.
	DefaultDatabase = "rollup"
	// CountsCollection holds one document per (id, type, timestamp).
	CountsCollection = "counts"
	// TokensCollection holds per-project bearer tokens (only their sha256 hex as _id).
	TokensCollection = "tokens"
	// ProjectsCollection holds one document per project ({_id: name, created_at}).
	ProjectsCollection = "projects"
	// MigrationsCollection records applied steps ({_id: version, name, applied_at}).
	MigrationsCollection = "migrations"
	// LockCollection holds the single lock document that guards Up.
	LockCollection = "migration_lock"
	// CountsKeyIndex is the name of the unique index on exactly {id: 1, type: 1, timestamp: 1}.
	CountsKeyIndex = "id_1_type_1_timestamp_1"
	// CountsWrittenAtIndex is the name of the index on counts.written_at (replays by write time).
	CountsWrittenAtIndex = "written_at_1"
	// CountsProjectTickIndex is the name of the index on counts {project: 1, timestamp: 1}.
	CountsProjectTickIndex = "project_1_timestamp_1"
	// TokensProjectIndex is the name of the index on tokens.project.
	TokensProjectIndex = "project_1"
)

// Field names of documents in the counts collection (and tokens/projects where shared).
const (
	// FieldID is the node id (string).
	FieldID = "id"
	// FieldType is the node type (string).
	FieldType = "type"
	// FieldTimestamp is the tick start (UTC DateTime aligned to the tick).
	FieldTimestamp = "timestamp"
	// FieldProject is the project name (string).
	FieldProject = "project"
	// FieldOnline is the count of online servers (int64).
	FieldOnline = "online"
	// FieldVersion is the optimistic version: observation time in unix nanoseconds (int64).
	FieldVersion = "version"
	// FieldSubmissionID is the id of the submission that wrote the document (string).
	FieldSubmissionID = "submission_id"
	// FieldWrittenAt is the server time of the last write (DateTime).
	FieldWrittenAt = "written_at"
	// FieldName is the name field of tokens and migrations documents.
	FieldName = "name"
	// FieldCreatedAt is the creation time of tokens and projects documents.
	FieldCreatedAt = "created_at"
	// FieldAppliedAt is the application time of a migrations document.
	FieldAppliedAt = "applied_at"
)
