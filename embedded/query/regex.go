package query

import (
	"regexp"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// regexPred matches strings and symbols against a regular expression and regex values equal
// to it.
type regexPred struct {
	pattern, options string
	re               *regexp.Regexp
}

func itoa(i int) string { return strconv.Itoa(i) }

// compileRegexPred translates a PCRE pattern as MongoDB uses it to Go's RE2. Options i, m, s
// are supported (u is accepted and ignored); x and any pattern RE2 cannot express (look-around,
// back-references, possessive quantifiers...) are NotImplemented rather than approximated.
func compileRegexPred(pattern, options string) (*regexPred, error) {
	flags := ""
	for _, o := range options {
		switch o {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, o) {
				flags += string(o)
			}
		case 'u':
		case 'x':
			return nil, mongoerr.NotImplementedf("regex option x")
		default:
			return nil, mongoerr.New(51108, "invalid flag in regex options: %c", o)
		}
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, mongoerr.BadValuef("Regular expression cannot contain an embedded null byte")
	}
	src, ok := translatePCRE(pattern, strings.ContainsRune(flags, 'm'))
	if !ok {
		return nil, mongoerr.NotImplementedf("regular expression %q (not expressible in RE2)", pattern)
	}
	if flags != "" {
		src = "(?" + flags + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, mongoerr.NotImplementedf("regular expression %q (not expressible in RE2)", pattern)
	}
	return &regexPred{pattern: pattern, options: options, re: re}, nil
}

// translatePCRE rewrites the PCRE constructs whose RE2 meaning differs: outside multiline
// mode "$" and "\Z" match at the end or before a final newline. Only a boolean match is
// needed, so consuming that newline is harmless. It reports false for constructs RE2 lacks.
func translatePCRE(p string, multiline bool) (string, bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			if i+1 >= len(p) {
				return "", false
			}
			n := p[i+1]
			i++
			if !inClass {
				switch n {
				case 'Z':
					b.WriteString(`(?:\n?\z)`)
					continue
				case 'G', 'K', 'R', 'X', 'g', 'k', 'h', 'H', 'v', 'V':
					return "", false
				}
				if n >= '1' && n <= '9' {
					return "", false // back-reference
				}
			}
			b.WriteByte('\\')
			b.WriteByte(n)
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteString(`\]`)
				i++
			}
		case c == '$' && !multiline:
			b.WriteString(`(?:\n?\z)`)
		case c == '(' && i+1 < len(p) && p[i+1] == '?':
			if i+2 < len(p) {
				switch p[i+2] {
				case '=', '!', '>', '|', '#', '(', 'R', '&', 'C', '+':
					return "", false
				case '<':
					if i+3 < len(p) && (p[i+3] == '=' || p[i+3] == '!') {
						return "", false
					}
				case 'P':
					if i+3 < len(p) && (p[i+3] == '=' || p[i+3] == '>') {
						return "", false
					}
				}
			}
			b.WriteByte(c)
		case (c == '+' || c == '*' || c == '?' || c == '}') && i+1 < len(p) && p[i+1] == '+':
			return "", false // possessive quantifier
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func (r *regexPred) test(v any, missing bool) bool {
	if missing {
		return false
	}
	switch x := v.(type) {
	case string:
		return r.re.MatchString(x)
	case bson.Symbol:
		return r.re.MatchString(string(x))
	case bson.Regex:
		return x.Pattern == r.pattern && x.Options == r.options
	}
	return false
}
