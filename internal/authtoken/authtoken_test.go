package authtoken

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func Test_HolderRotation(t *testing.T) {
	var nilHolder *Holder
	if nilHolder.Token() != "" || nilHolder.Load() == nil {
		t.Fatal("a nil holder must hold no token")
	}
	var zero Holder
	if !zero.Set("a") || zero.Token() != "a" || zero.Load().Previous != "" {
		t.Fatalf("zero holder after Set: %+v", zero.Load())
	}
	h := NewHolder("a")
	if h.Set("a") {
		t.Fatal("setting the same token reported a change")
	}
	before := h.Load()
	if !h.Set("b") {
		t.Fatal("rotation reported no change")
	}
	s := h.Load()
	if s.Token != "b" || s.Previous != "a" || s.Rotated.IsZero() || before.Token != "a" || before.Previous != "" {
		t.Fatalf("after rotation %+v (before %+v): a Secret must never change", s, before)
	}
	if h.Set("b"); h.Load() != s {
		t.Fatal("a reload of the same token replaced the Secret (and would extend the grace)")
	}
}

// Concurrent rotations leave a Secret whose Previous was current once.
func Test_HolderConcurrentSet(t *testing.T) {
	h := NewHolder("t0")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				h.Set(string(rune('a'+i)) + string(rune('a'+j%26)))
				_ = h.Token()
			}
		}()
	}
	wg.Wait()
	if s := h.Load(); s.Token == "" || s.Previous == "" || s.Token == s.Previous {
		t.Fatalf("final %+v", s)
	}
}

func Test_Validate(t *testing.T) {
	for _, tt := range []struct {
		token string
		ok    bool
	}{
		{"s3cret", true},
		{"A-Za-z0-9._~+/=!#$%&*", true},
		{"", false},
		{"with space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"caf\u00e9", false},
	} {
		err := Validate(tt.token)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q) = %v, want ok=%v", tt.token, err, tt.ok)
		}
		if err != nil && tt.token != "" && strings.Contains(err.Error(), tt.token) {
			t.Errorf("Validate(%q) quotes the token: %v", tt.token, err)
		}
	}
}

// Test_HolderTwoTokens: a holder accepts its token and its second one,
// nothing else, and sends only the first; setting a pair records the
// replaced token as Previous only when the sent token changes.
func Test_HolderTwoTokens(t *testing.T) {
	h := NewHolder("")
	if h.Accepts("") || h.Accepts("x") {
		t.Fatal("a holder without a token accepts something")
	}
	for _, step := range []struct {
		token, also  string
		changed      bool
		accepts      []string
		refuses      []string
		wantPrevious string
	}{
		{"old", "", true, []string{"old"}, []string{"new", "", "ol", "oldx"}, ""},
		{"old", "new", true, []string{"old", "new"}, []string{"", "ne", "newold"}, ""},
		{"old", "new", false, []string{"old", "new"}, nil, ""},
		{"new", "old", true, []string{"old", "new"}, []string{""}, "old"},
		{"new", "new", true, []string{"new"}, []string{"old"}, "old"}, // a second line equal to the first is no second token
		{"new", "", false, []string{"new"}, []string{"old"}, "old"},
	} {
		if got := h.SetTokens(step.token, step.also); got != step.changed {
			t.Fatalf("SetTokens(%q, %q) changed = %v", step.token, step.also, got)
		}
		s := h.Load()
		if h.Token() != step.token || s.Previous != step.wantPrevious {
			t.Fatalf("after SetTokens(%q, %q): %+v", step.token, step.also, s)
		}
		for _, tok := range step.accepts {
			if !h.Accepts(tok) {
				t.Errorf("after SetTokens(%q, %q): %q refused", step.token, step.also, tok)
			}
		}
		for _, tok := range step.refuses {
			if h.Accepts(tok) {
				t.Errorf("after SetTokens(%q, %q): %q accepted", step.token, step.also, tok)
			}
		}
	}
	var nilHolder *Holder
	if nilHolder.Accepts("x") {
		t.Fatal("a nil holder accepts a token")
	}
}

func Test_ReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want, also, problem string
	}{
		{name: "trimmed", path: write("ok", "  s3cret\n", 0o600), want: "s3cret"},
		{name: "group readable", path: write("group", "s3cret", 0o640), want: "s3cret"},
		{name: "two lines", path: write("lines", "new\nold\n", 0o600), want: "new", also: "old"},
		{name: "two lines, CRLF and blanks around", path: write("crlf", "\r\n new \r\n old\r\n\n", 0o600), want: "new", also: "old"},
		{name: "two equal lines", path: write("same", "s3cret\ns3cret\n", 0o600), want: "s3cret"},
		{name: "missing", path: filepath.Join(dir, "nope"), problem: "no such file"},
		{name: "directory", path: dir, problem: "is a directory"},
		{name: "empty", path: write("empty", "", 0o600), problem: "is empty"},
		{name: "blank", path: write("blank", " \n\t\n", 0o600), problem: "is empty"},
		{name: "world-writable", path: write("ww", "s3cret", 0o666), problem: "world-writable"},
		{name: "three lines", path: write("three", "a\nb\nc\n", 0o600), problem: "has 3 lines"},
		{name: "an empty line between two", path: write("gap", "a\n\nb\n", 0o600), problem: "has 3 lines"},
		{name: "two tokens on a line", path: write("spaced", "a b\nc", 0o600), problem: "line 1: invalid auth token: byte 1"},
		{name: "bad second line", path: write("bad2", "a\nb c", 0o600), problem: "line 2: invalid auth token: byte 1"},
		{name: "too large", path: write("large", strings.Repeat("x", MaxFileSize+1), 0o600), problem: "larger than"},
	}
	if path, problem, ok := UnreadableForRoot(); ok {
		tests = append(tests, struct{ name, path, want, also, problem string }{name: "unreadable, even by root", path: path, problem: problem})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, also, err := ReadFile(tt.path)
			if tt.problem == "" {
				if err != nil || got != tt.want || also != tt.also {
					t.Fatalf("ReadFile = %q, %q, %v; want %q, %q", got, also, err, tt.want, tt.also)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.path) ||
				!strings.Contains(err.Error(), tt.problem) {
				t.Fatalf("ReadFile = %q, %v; want an error naming %s and %q", got, err, tt.path, tt.problem)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
}
