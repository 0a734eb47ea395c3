package tree

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" = valid
	}{
		{"simple", "srv-01", ""},
		{"all classes", "Az09_:-", ""},
		{"one byte", "a", ""},
		{"max length", strings.Repeat("x", MaxIDLen), ""},
		{"empty", "", "empty"},
		{"too long", strings.Repeat("x", MaxIDLen+1), "129 characters, at most 128"},
		{"dollar", "$where", `character 0 is "$"; only A-Z a-z 0-9 _ : - are allowed`},
		{"dot", "a.b", `character 1 is "."`},
		{"space", "a b", `character 1 is " "`},
		{"slash", "a/b", `character 1 is "/"`},
		{"nul", "a\x00", `character 1 is "\x00"`},
		{"newline", "a\n", `character 1 is "\n"`},
		// Non-ASCII: the character and its position in characters, never a byte of it.
		{"non-ascii", "é", `character 0 is "é" (U+00E9, not ASCII); only`},
		{"non-ascii after non-ascii", "ééé$", `character 0 is "é" (U+00E9`},
		{"position counts characters", "srv-" + "\u0430" + "b", `character 4 is "а" (U+0430, not ASCII)`},
		{"after a 4-byte character", "a😀", `character 1 is "😀" (U+1F600, not ASCII)`},
		{"invisible", "a\u200bb", `character 1 is "\u200b" (U+200B, not ASCII)`},
		{"replacement character", "ab\ufffd", `character 2 is "�" (U+FFFD, the replacement character: the text sent was not valid UTF-8)`},
		{"not UTF-8", "ab\xc3(", `character 2 is the byte 0xC3, which is not UTF-8`},
		{"long and not ASCII", strings.Repeat("é", 100), `character 0 is "é"`},
		{"long with a bad character", strings.Repeat("x", 200) + "$", `character 200 is "$"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []struct {
				what string
				fn   func(string) error
			}{{"id", ValidateID}, {"type", ValidateType}, {"project", func(s string) error { return ValidateName("project", s) }}} {
				err := f.fn(tc.in)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("%s(%q) = %v, want nil", f.what, tc.in, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s(%q) = nil, want error containing %q", f.what, tc.in, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), f.what) {
					t.Errorf("%s(%q) = %q, want it to contain %q and %q", f.what, tc.in, err, tc.wantErr, f.what)
				}
				checkCharacterPosition(t, tc.in, err)
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("%s(%q) does not wrap ErrInvalid", f.what, tc.in)
				}
			}
		})
	}
}

// TestValidateIDAllBytes cross-checks every single byte against the documented set.
func TestValidateIDAllBytes(t *testing.T) {
	const allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:-"
	for c := 0; c < 256; c++ {
		s := "a" + string([]byte{byte(c)})
		want := strings.IndexByte(allowed, byte(c)) >= 0
		if got := ValidateID(s) == nil; got != want {
			t.Errorf("ValidateID(%q) valid=%v, want %v", s, got, want)
		}
	}
}

func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "$x", strings.Repeat("z", 200), "ok_id:1-2", "é$", "ab\xc3(", "a\ufffd", "x\u0430"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateID(s)
		naive := len(s) >= 1 && len(s) <= MaxIDLen && strings.Trim(s,
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:-") == ""
		if (err == nil) != naive {
			t.Fatalf("ValidateID(%q) = %v, naive valid = %v", s, err, naive)
		}
		if err == nil && (strings.ContainsAny(s, "$. ")) {
			t.Fatalf("accepted unsafe %q", s)
		}
		checkCharacterPosition(t, s, err)
	})
}

// checkCharacterPosition: a "character N is" error names the first character of s (as
// []rune counts them: a byte that is not UTF-8 is one character) that is not allowed.
func checkCharacterPosition(t *testing.T, s string, err error) {
	t.Helper()
	var ne *NameError
	if !errors.As(err, &ne) || !strings.HasPrefix(ne.Reason, "character ") {
		return
	}
	var n int
	if _, serr := fmt.Sscanf(ne.Reason, "character %d is", &n); serr != nil {
		t.Fatalf("%q: reason %q: %v", s, ne.Reason, serr)
	}
	const allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:-"
	rs := []rune(s)
	if n >= len(rs) || strings.ContainsRune(allowed, rs[n]) || strings.Trim(string(rs[:n]), allowed) != "" {
		t.Fatalf("%q: reason %q does not name the first character that is not allowed", s, ne.Reason)
	}
	if q := strconv.Quote(string(rs[n])); rs[n] != utf8.RuneError && !strings.Contains(ne.Reason, q) {
		t.Fatalf("%q: reason %q does not quote the character %s", s, ne.Reason, q)
	}
}

func TestNameErrorReason(t *testing.T) {
	err := ValidateName("project", "a$")
	var ne *NameError
	if !errors.As(err, &ne) {
		t.Fatalf("ValidateName error %T is not *NameError", err)
	}
	if ne.What != "project" || ne.Reason != `character 1 is "$"; only A-Z a-z 0-9 _ : - are allowed` {
		t.Fatalf("NameError = %+v", ne)
	}
	if got, want := err.Error(), `invalid project: character 1 is "$"; only A-Z a-z 0-9 _ : - are allowed`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
