package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// InstanceIDFile is the file that keeps the embedded store's instance id in its data directory.
const InstanceIDFile = "instance-id"

// DefaultInstanceID is the instance id when none is configured: the one kept in the embedded
// store's data directory dir (made on first use), else host@listen, which no other live
// process on this host can share (it could not bind the address).
func DefaultInstanceID(dir, listen string) (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if dir == "" {
		return host + "@" + listen, nil
	}
	path := filepath.Join(dir, InstanceIDFile)
	b, err := os.ReadFile(path)
	if id := strings.TrimSpace(string(b)); err == nil && CheckInstanceID(id) == nil && id != "" {
		return id, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read instance id: %w", err)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	id := host + "-" + hex.EncodeToString(r[:])
	if err := writeFileSync(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("write instance id: %w", err)
	}
	return id, nil
}

// writeFileSync writes data to path durably (the data directory is locked by the store).
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// CheckInstanceID accepts "" (the default) and printable ids of at most 200 bytes.
func CheckInstanceID(id string) error {
	if len(id) > 200 {
		return fmt.Errorf("must be at most 200 bytes, got %d", len(id))
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%q has a space or a control character", id)
		}
	}
	return nil
}
