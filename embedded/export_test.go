package embedded

import "slices"

// OptionTable is the option table the tests walk (options_table_test.go) and the docs show:
// per command (test-only ones included), the fields it implements besides the generic ones
// ("*": any field).
func OptionTable() map[string][]string {
	out := map[string][]string{}
	for name, spec := range commandTable() {
		out[name] = slices.Clone(spec.fields)
	}
	return out
}

// Exported copies of the shared rows of the option table.
var (
	GenericFields        = genericFields
	ReadConcernLevels    = readConcernLevels
	SnapshotReadCommands = snapshotReadCommands
	APIV1Commands        = apiV1Commands
	ExhaustCommands      = exhaustCommands
)

// Exported copies of the rows checked where they are compiled.
var (
	AggregateStages = aggregateStages
	QueryOperators  = queryOperators
	UpdateOperators = updateOperators
)
