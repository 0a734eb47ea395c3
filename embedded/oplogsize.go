package embedded

import (
	"fmt"

	"github.com/gameops/rollup/embedded/storage"
)

// DefaultOplogSizeMB is the retained oplog, in MiB, of a server whose Config.Storage leaves
// OplogMaxBytes unset.
const DefaultOplogSizeMB = int(storage.DefaultOplogMaxBytes >> 20)

// MaxOplogSizeMB bounds the retained oplog a command line may ask for (1 TiB, as far beyond
// any machine's memory as mongod's own limit).
const MaxOplogSizeMB = 1 << 20

// CheckOplogSizeMB checks a retained oplog size in MiB given on a command line: at least 1
// (mongod's --oplogSize has the same floor in MB) and at most MaxOplogSizeMB.
func CheckOplogSizeMB(mb int) error {
	if mb < 1 || mb > MaxOplogSizeMB {
		return fmt.Errorf("want 1 to %d MiB, got %d", MaxOplogSizeMB, mb)
	}
	return nil
}
