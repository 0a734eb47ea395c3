package tree

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxIDLen is the longest node id, type or other name accepted, in bytes (which are
// characters: every accepted character is ASCII).
const MaxIDLen = 128

// ErrInvalid matches (errors.Is) every error ValidateID, ValidateType and ValidateName return.
var ErrInvalid = errors.New("invalid name")

// NameError says why a name (node id, type, project, submission id) is not accepted.
type NameError struct {
	// What names the kind of value: "id", "type", "project"...
	What string
	// Reason says what is wrong, without the kind: "empty", "character 3 is \"$\"; ...".
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
//
// The first character that is not allowed is reported as a character, never as a byte of
// it: its position counts characters (Unicode code points) from 0, and it is quoted, with its
// code point when it is not ASCII (a Cyrillic "а" looks like a Latin "a"), or as the byte
// that is not UTF-8. The length is checked after the characters, so it is a number of ASCII
// characters.
func ValidateName(what, s string) error {
	if s == "" {
		return &NameError{What: what, Reason: "empty"}
	}
	pos := 0
	for i := 0; i < len(s); pos++ {
		if c := s[i]; c < utf8.RuneSelf {
			if !safeByte(c) {
				return &NameError{What: what, Reason: fmt.Sprintf("character %d is %q; %s", pos, s[i:i+1], allowedChars)}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return &NameError{What: what, Reason: fmt.Sprintf("character %d is the byte 0x%02X, which is not UTF-8; %s", pos, s[i], allowedChars)}
		}
		note := "not ASCII"
		if r == utf8.RuneError {
			note = "the replacement character: the text sent was not valid UTF-8"
		}
		return &NameError{What: what, Reason: fmt.Sprintf("character %d is %q (U+%04X, %s); %s", pos, string(r), r, note, allowedChars)}
	}
	if len(s) > MaxIDLen {
		return &NameError{What: what, Reason: fmt.Sprintf("%d characters, at most %d allowed", len(s), MaxIDLen)}
	}
	return nil
}

// allowedChars ends the message of a character that is not allowed.
const allowedChars = "only A-Z a-z 0-9 _ : - are allowed"

func safeByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '_', c == ':', c == '-':
		return true
	}
	return false
}
