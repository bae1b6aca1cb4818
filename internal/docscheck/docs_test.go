package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package.
var root = filepath.Join("..", "..")

// forbidden are the strings a user's clone cannot make sense of: the
// private reference material beside the repository and its section and
// document numbering.
var forbidden = []*regexp.Regexp{
	regexp.MustCompile(`\.\./shared`),
	regexp.MustCompile(`\bSPEC\b`),
	regexp.MustCompile(`§`),
	regexp.MustCompile(`(?i)\bseed 00\d`),
}

// pages returns README.md and every Markdown file under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func Test_DocsStandAlone(t *testing.T) {
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range check(page, string(raw)) {
			t.Error(problem)
		}
	}
}

var (
	// [text](target) and ![alt](target), target without spaces.
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	// <a href="target"> and <img src="target">.
	htmlLink = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	fence    = regexp.MustCompile("(?m)^\\s*```")
)

// anchorCache holds each page's anchors, by path, for one check.
var anchorCache map[string][]string

// check returns what is wrong with one page: forbidden strings, and
// relative links to files or headings that do not exist.
func check(page, text string) []string {
	var problems []string
	anchorCache = map[string][]string{}
	rel, _ := filepath.Rel(root, page)
	for i, line := range strings.Split(text, "\n") {
		for _, f := range forbidden {
			if m := f.FindString(line); m != "" {
				problems = append(problems, fmt.Sprintf("%s:%d mentions %q, which a clone does not have: say it in the project's own words", rel, i+1, m))
			}
		}
	}
	for _, target := range links(text) {
		if err := resolve(page, text, target); err != nil {
			problems = append(problems, fmt.Sprintf("%s: link %q: %v", rel, target, err))
		}
	}
	return problems
}

// links returns the link targets of a page outside fenced code blocks.
func links(text string) []string {
	var out []string
	for i, part := range fence.Split(text, -1) {
		if i%2 == 1 { // inside a fence
			continue
		}
		for _, re := range []*regexp.Regexp{mdLink, htmlLink} {
			for _, m := range re.FindAllStringSubmatch(part, -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// resolve checks a relative link from page: the file exists and, for a
// fragment into a Markdown page, the heading or anchor exists there.
func resolve(page, text, target string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, frag, _ := strings.Cut(target, "#")
	dest, destText := page, text
	if path != "" {
		dest = filepath.Join(filepath.Dir(page), path)
		if _, err := os.Stat(dest); err != nil {
			return fmt.Errorf("no such file in the repository")
		}
		if frag == "" || !strings.HasSuffix(dest, ".md") {
			return nil
		}
		raw, err := os.ReadFile(dest)
		if err != nil {
			return err
		}
		destText = string(raw)
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	ids, ok := anchorCache[dest]
	if !ok {
		ids = anchors(destText)
		anchorCache[dest] = ids
	}
	if !slices.Contains(ids, frag) {
		return fmt.Errorf("%s has no heading or anchor #%s", filepath.Base(dest), frag)
	}
	return nil
}

var (
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*$`)
	anchorID = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	inline   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the fragment ids a Markdown page defines: explicit
// <a id> anchors and the slugs GitHub gives its headings (lower case,
// punctuation dropped, spaces to hyphens, -1, -2 ... for repeats).
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, m := range anchorID.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	for i, part := range fence.Split(text, -1) {
		if i%2 == 1 {
			continue
		}
		for _, line := range strings.Split(part, "\n") {
			m := heading.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				out = append(out, fmt.Sprintf("%s-%d", s, n))
			} else {
				out = append(out, s)
			}
			seen[s]++
		}
	}
	return out
}

func slug(h string) string {
	h = inline.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Test_Check shows the check catches what it exists for, on pages made up
// for it (so it cannot pass by looking at nothing).
func Test_Check(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "a.md"), []byte("# A page\n\n## The `make run` demo\n<a id=\"x-1\"></a>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "README.md")
	for _, tc := range []struct {
		name, text string
		bad        bool
	}{
		{"clean", "See [a](docs/a.md), [demo](docs/a.md#the-make-run-demo), [x](docs/a.md#x-1) and [https](https://example.com).", false},
		{"shared dir", "Vectors are in ../shared/testdata.", true},
		{"spec section", "As SPEC says.", true},
		{"section sign", "See §3.", true},
		{"seed", "Dynamo's seed 001.", true},
		{"seed, capitalised", "Seed 001's rules.", true},
		{"missing file", "See [b](docs/b.md).", true},
		{"missing heading", "See [a](docs/a.md#nowhere).", true},
		{"missing own heading", "# Top\nSee [below](#below).", true},
		{"own heading", "# Top\n## Below\nSee [below](#below).", false},
		{"link in a fence is code", "```\n[b](docs/b.md)\n```\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := check(page, tc.text)
			if got := len(problems) > 0; got != tc.bad {
				t.Fatalf("problems %q, want some: %v", problems, tc.bad)
			}
		})
	}
}
