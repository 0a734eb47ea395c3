package repocheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches a markdown link's target: [text](target) (not images' sizes, not code).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// goFile matches a name of a Go file in prose: a path or a bare name ending in .go.
var goFile = regexp.MustCompile("(?:^|[\\s`(\"'])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\\.go)\\b")

// markdownFiles returns README.md and every .md file under docs/, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// anchors returns the GitHub anchors of a markdown document's headings: lower case, spaces
// to hyphens, punctuation dropped, a repeated heading numbered -1, -2, ….
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		a := slug(strings.TrimLeft(line, "#"))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's anchor of a heading's text.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlug checks the anchor rule on headings of our docs.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		" The soak: 2,000 seeds of faults, restarts and two tenants (issue #12, item 9)": "the-soak-2000-seeds-of-faults-restarts-and-two-tenants-issue-12-item-9",
		"Ingest end to end (issue #4)": "ingest-end-to-end-issue-4",
		"`rollup verify` — proofs":     "rollup-verify--proofs",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDocLinks: every relative link of README.md and docs/ names a file that exists and, with
// a #fragment, a heading of it.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	for _, md := range markdownFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, md))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			full := filepath.Join(root, md)
			if path != "" {
				full = filepath.Join(root, filepath.Dir(md), path)
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s: link %q: no such file", md, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(full, ".md") {
				continue
			}
			a, err := anchorsOf(full)
			if err != nil {
				t.Errorf("%s: link %q: %v", md, target, err)
				continue
			}
			if !a[frag] {
				t.Errorf("%s: link %q: no heading with that anchor", md, target)
			}
		}
	}
}

// stripCode drops inline code spans, so `a](b)` in code is no link.
func stripCode(s string) string {
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(s, "``")
}

// TestNamedGoFilesExist: every .go file named in a Go comment, README.md or docs/ exists: a
// path from the repository's root (or the naming file's folder, or the module embedded/), a
// bare name in the naming file's folder or, in docs, anywhere in the repository.
func TestNamedGoFilesExist(t *testing.T) {
	root := repoRoot(t)
	byName := map[string]bool{}
	var goFiles []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			byName[d.Name()] = true
			goFiles = append(goFiles, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	check := func(file, text string, docs bool) {
		dir := filepath.Dir(file)
		for _, m := range goFile.FindAllStringSubmatch(text, -1) {
			name := m[1]
			switch {
			case exists(filepath.Join(root, name)), exists(filepath.Join(dir, name)),
				exists(filepath.Join(root, "embedded", name)):
			case !strings.Contains(name, "/") && docs && byName[name]:
			default:
				rel, _ := filepath.Rel(root, file)
				t.Errorf("%s names %s, which does not exist", rel, name)
			}
		}
	}
	for _, md := range markdownFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, md))
		if err != nil {
			t.Fatal(err)
		}
		check(filepath.Join(root, md), string(b), true)
	}
	for _, f := range goFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(f, goComments(string(b)), false)
	}
}

// goComments returns the text of a Go file's // comments.
func goComments(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "// "); i >= 0 && !strings.Contains(line[:i], `"`) {
			b.WriteString(line[i+3:])
			b.WriteByte('\n')
		}
	}
	return b.String()
}
