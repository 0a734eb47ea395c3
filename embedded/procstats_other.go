//go:build !unix

package embedded

// openFileLimit is unknown off unix: serverStatus then leaves connections.available out.
func openFileLimit() (uint64, bool) { return 0, false }
