package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestScanner(t *testing.T) {
	tests := []struct {
		in      string
		wantStr string
		wantInt string
		strOK   bool
		intOK   bool
	}{
		{in: ` "abc" `, wantStr: "abc", strOK: true},
		{in: `""`, wantStr: "", strOK: true},
		{in: `"a\"b"`},        // escapes go to encoding/json
		{in: "\"\u00e9\""},    // non-ASCII too
		{in: "\"a\tb\""},      // control characters are invalid JSON
		{in: `"unterminated`}, // and so is this
		{in: ` 42`, wantInt: "42", intOK: true},
		{in: `-7`, wantInt: "-7", intOK: true},
		{in: `0`, wantInt: "0", intOK: true},
		{in: `-`},
		{in: `x`},
	}
	for _, tt := range tests {
		p := New(tt.in)
		s, ok := p.Str()
		if ok != tt.strOK || s != tt.wantStr {
			t.Errorf("Str(%q) = %q, %v; want %q, %v", tt.in, s, ok, tt.wantStr, tt.strOK)
		}
		if ok {
			var std string
			if err := json.Unmarshal([]byte(tt.in), &std); err != nil || std != s {
				t.Errorf("Str(%q) = %q but encoding/json reads %q, %v", tt.in, s, std, err)
			}
		}
		p = New(tt.in)
		n, ok := p.Int()
		if ok != tt.intOK || n != tt.wantInt {
			t.Errorf("Int(%q) = %q, %v; want %q, %v", tt.in, n, ok, tt.wantInt, tt.intOK)
		}
	}
	p := New(` { "k" : 1 } `)
	if !p.Lit('{') {
		t.Fatal("Lit")
	}
	if p.Rest() != ` "k" : 1 } ` {
		t.Fatalf("Rest = %q", p.Rest())
	}
	if k, ok := p.Str(); !ok || k != "k" || !p.Lit(':') {
		t.Fatal("key")
	}
	if n, ok := p.Int(); !ok || n != "1" || !p.Lit('}') || !p.End() {
		t.Fatal("value and end")
	}
}
