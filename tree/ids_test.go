package tree

import (
	"errors"
	"strings"
	"testing"
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
		{"too long", strings.Repeat("x", MaxIDLen+1), "129 bytes, at most 128"},
		{"dollar", "$where", `byte 0 is "$"`},
		{"dot", "a.b", `byte 1 is "."`},
		{"space", "a b", `byte 1 is " "`},
		{"slash", "a/b", `byte 1 is "/"`},
		{"nul", "a\x00", `byte 1 is "\x00"`},
		{"non-ascii", "é", `byte 0 is "\xc3"`},
		{"newline", "a\n", `byte 1 is "\n"`},
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
	for _, s := range []string{"", "a", "a.b", "$x", strings.Repeat("z", 200), "ok_id:1-2"} {
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
	})
}

func TestNameErrorReason(t *testing.T) {
	err := ValidateName("project", "a$")
	var ne *NameError
	if !errors.As(err, &ne) {
		t.Fatalf("ValidateName error %T is not *NameError", err)
	}
	if ne.What != "project" || ne.Reason != `byte 1 is "$"; only A-Z a-z 0-9 _ : - are allowed` {
		t.Fatalf("NameError = %+v", ne)
	}
	if got, want := err.Error(), `invalid project: byte 1 is "$"; only A-Z a-z 0-9 _ : - are allowed`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
