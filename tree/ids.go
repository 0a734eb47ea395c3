package tree

import (
	"errors"
	"fmt"
)

// MaxIDLen is the longest node id or type accepted, in bytes.
const MaxIDLen = 128

// ErrInvalid is wrapped by every error ValidateID and ValidateType return.
var ErrInvalid = errors.New("invalid")

// ValidateID checks a node id: 1–128 bytes of [A-Za-z0-9_:-]. The character set keeps ids
// safe as MongoDB field values and paths (no "$", no ".", no spaces or control bytes) and in
// URLs and logs. Node ids are unique within a deployment: one id names one node of the
// hierarchy whatever project or type it is reported under. The error says what is wrong.
func ValidateID(s string) error {
	return validateName("id", s)
}

// ValidateType checks a node type with the same rule as ValidateID: 1–128 bytes of
// [A-Za-z0-9_:-].
func ValidateType(s string) error {
	return validateName("type", s)
}

func validateName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w %s: empty", ErrInvalid, what)
	}
	if len(s) > MaxIDLen {
		return fmt.Errorf("%w %s: %d bytes, at most %d allowed", ErrInvalid, what, len(s), MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return fmt.Errorf("%w %s: byte %d is %q; only A-Z a-z 0-9 _ : - are allowed", ErrInvalid, what, i, s[i:i+1])
		}
	}
	return nil
}

func safeByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '_', c == ':', c == '-':
		return true
	}
	return false
}
