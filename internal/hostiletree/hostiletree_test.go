package hostiletree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCasesAreWhatTheySay writes every round of every case and checks the
// flags, so that no case can pass a builder's test for the wrong reason:
// an Escapes case has a link that, written as it is, resolves outside the
// root (and the others have none); every link of the table is written.
func TestCasesAreWhatTheySay(t *testing.T) {
	for _, c := range append(Cases(), Many(50), SparseFile(1<<30)) {
		t.Run(c.Name, func(t *testing.T) {
			escapes := false
			for i, nodes := range c.Rounds {
				root := filepath.Join(t.TempDir(), "root")
				if err := os.Mkdir(root, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := Write(root, nodes); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				for _, n := range nodes {
					if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(n.Path))); err != nil {
						t.Errorf("round %d: %s %q was not written: %v", i, n.Type, n.Path, err)
					}
				}
				out, err := LinksOutside(root)
				if err != nil {
					t.Fatal(err)
				}
				escapes = escapes || len(out) > 0
			}
			if escapes != c.Escapes {
				t.Errorf("Escapes is %v, but written as it is the case has links that resolve outside: %v", c.Escapes, escapes)
			}
		})
	}
}

// TestLinksOutside pins the resolution: through links, with "..", into a
// forbidden subtree, dangling and looping.
func TestLinksOutside(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(root, []Node{
		f("e/f", "f"), d(".git"),
		l("e/self", "../e"),             // inside
		l("e/esc", "self/../.."),        // outside, though "e/self/../.." is "." as text
		l("e/in", "self/f"),             // inside
		l("abs", "/"),                   // outside
		l("dangling-in", "missing/x"),   // inside
		l("dangling-out", "../nowhere"), // outside
		l("loop1", "loop2"), l("loop2", "loop1"),
		l("git", ".git"), // inside, but forbidden below
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := LinksOutside(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"abs", "dangling-out", "e/esc"}; !slices.Equal(got, want) {
		t.Errorf("LinksOutside = %q, want %q", got, want)
	}
	got, err = LinksOutside(root, ".git")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"abs", "dangling-out", "e/esc", "git"}; !slices.Equal(got, want) {
		t.Errorf("LinksOutside(.git forbidden) = %q, want %q", got, want)
	}
}

// TestWriteRefuses: unclean paths, and a node below a link.
func TestWriteRefuses(t *testing.T) {
	root := t.TempDir()
	for _, nodes := range [][]Node{
		{f("../x", "")}, {f("/abs", "")}, {f("a//b", "")}, {f("a/./b", "")},
		{l("lnk", "."), f("lnk/x", "")},
	} {
		if err := Write(root, nodes); err == nil {
			t.Errorf("Write(%v) succeeded; want an error", nodes)
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(root), "x")); err == nil {
		t.Errorf("Write created a file outside its root")
	}
}
