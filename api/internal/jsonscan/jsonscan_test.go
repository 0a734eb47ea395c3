package jsonscan

import (
	"encoding/json"
	"slices"
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

func TestObject(t *testing.T) {
	// member knows keys "a" and "b" (integers) and "c" (a string) and fails at
	// any other key.
	tests := []struct {
		name string
		in   string // after the object's '{'
		ok   bool
		keys []string // the keys member was called with, in order
		rest string   // what is left when ok
	}{
		{name: "empty object", in: ` } x`, ok: true, rest: ` x`},
		{name: "members", in: ` "a" : 1 , "c":"v","b":-2 }, `, ok: true, keys: []string{"a", "c", "b"}, rest: `, `},
		{name: "duplicate key", in: `"a":1,"a":2}`, keys: []string{"a", "a"}},
		{name: "unknown key", in: `"a":1,"x":2}`, keys: []string{"a", "x"}},
		{name: "member fails reading the value", in: `"c":1}`, keys: []string{"c"}},
		{name: "missing colon", in: `"a" 1}`},
		{name: "trailing comma", in: `"a":1,}`, keys: []string{"a"}},
		{name: "missing comma", in: `"a":1 "b":2}`, keys: []string{"a"}},
		{name: "leading comma", in: `,"a":1}`},
		{name: "unterminated", in: `"a":1`, keys: []string{"a"}},
		{name: "nothing", in: ``},
		{name: "key not a string", in: `a:1}`},
		{name: "key with an escape", in: `"\u0061":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.in)
			var keys []string
			ok := p.Object(func(key string) (uint, bool) {
				keys = append(keys, key)
				switch key {
				case "a":
					_, ok := p.Int()
					return 1 << 0, ok
				case "b":
					_, ok := p.Int()
					return 1 << 1, ok
				case "c":
					_, ok := p.Str()
					return 1 << 2, ok
				}
				return 0, false
			})
			if ok != tt.ok {
				t.Errorf("Object(%q) = %v, want %v", tt.in, ok, tt.ok)
			}
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("Object(%q) called member with %q, want %q", tt.in, keys, tt.keys)
			}
			if ok && p.Rest() != tt.rest {
				t.Errorf("Object(%q) left %q, want %q", tt.in, p.Rest(), tt.rest)
			}
		})
	}
}
