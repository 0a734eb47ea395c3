package rollup

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure: package rollup is pure — the only MongoDB driver packages it may depend on are
// bson and what bson itself needs (no connection, topology or auth code). The documents'
// codecs live in package store.
func TestPure(t *testing.T) {
	deps := func(pkg string) []string {
		t.Helper()
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	allowed := map[string]bool{}
	for _, p := range deps("go.mongodb.org/mongo-driver/v2/bson") {
		allowed[p] = true
	}
	const driver = "go.mongodb.org/mongo-driver/"
	for _, p := range deps(".") {
		if strings.HasPrefix(p, driver) && !allowed[p] {
			t.Errorf("package rollup depends on %s", p)
		}
	}
}
