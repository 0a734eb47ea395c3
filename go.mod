module github.com/gameops/rollup

go 1.26

require go.mongodb.org/mongo-driver/v2 v2.9.3

require (
	github.com/google/btree v1.1.3 // indirect
	github.com/sourcegraph/conc v0.3.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
)
