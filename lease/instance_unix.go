//go:build unix

package lease

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// processAlive reports whether pid runs on this host (a zombie does not count).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr == nil {
		// pid (comm) state ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	return true
}
