package tree

import (
	"errors"
	"fmt"
)

// MaxIDLen is the longest node id, type or other name accepted, in bytes.
const MaxIDLen = 128

// ErrInvalid matches (errors.Is) every error ValidateID, ValidateType and ValidateName return.
var ErrInvalid = errors.New("invalid name")

// NameError says why a name (node id, type, project, submission id) is not accepted.
type NameError struct {
	// What names the kind of value: "id", "type", "project"...
	What string
	// Reason says what is wrong, without the kind: "empty", "byte 3 is \"$\"; ...".
	Reason string
}

// Error returns "invalid <what>: <reason>".
func (e *NameError) Error() string { return "invalid " + e.What + ": " + e.Reason }

// Is reports whether target is ErrInvalid.
func (e *NameError) Is(target error) bool { return target == ErrInvalid }

// ValidateID checks a node id: 1–128 bytes of [A-Za-z0-9_:-]. The character set keeps ids
// safe as MongoDB values and in paths, URLs and logs (no "$", no ".", no spaces or control
// bytes, nothing outside ASCII). Node ids are unique within a deployment: one id names one
// node of the hierarchy, whatever project or type it is reported under. The returned error is
// a *NameError saying what is wrong.
func ValidateID(s string) error {
	return ValidateName("id", s)
}

// ValidateType checks a count type with the same rule as ValidateID.
func ValidateType(s string) error {
	return ValidateName("type", s)
}

// ValidateName checks s against the rule of ValidateID (1–128 bytes of [A-Za-z0-9_:-]); what
// names the kind of value in the error (for projects, submission ids and other names that
// follow the same rule).
func ValidateName(what, s string) error {
	if s == "" {
		return &NameError{What: what, Reason: "empty"}
	}
	if len(s) > MaxIDLen {
		return &NameError{What: what, Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(s), MaxIDLen)}
	}
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return &NameError{What: what, Reason: fmt.Sprintf("byte %d is %q; only A-Z a-z 0-9 _ : - are allowed", i, s[i:i+1])}
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
