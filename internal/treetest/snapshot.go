package treetest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Node is one entry of a directory as a reader sees it.
type Node struct {
	Mode  fs.FileMode // type, permission, setuid/setgid/sticky bits
	Data  string      // a regular file's bytes
	Link  string      // a symbolic link's target
	Nlink uint64
	Ino   uint64
}

// Snapshot reads the whole tree under dir without following any link.
func Snapshot(t testing.TB, dir string) map[string]Node {
	t.Helper()
	m := map[string]Node{}
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(filepath.Join(dir, rel))
		require.NoError(t, err)
		for _, e := range ents {
			p := path.Join(rel, e.Name())
			full := filepath.Join(dir, p)
			fi, err := os.Lstat(full)
			require.NoError(t, err)
			st := fi.Sys().(*syscall.Stat_t)
			n := Node{
				Mode:  fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
				Nlink: uint64(st.Nlink),
				Ino:   uint64(st.Ino),
			}
			switch {
			case fi.Mode().IsRegular():
				b, err := os.ReadFile(full)
				require.NoError(t, err)
				n.Data = string(b)
			case fi.Mode()&fs.ModeSymlink != 0:
				n.Link, err = os.Readlink(full)
				require.NoError(t, err)
			case fi.IsDir():
				walk(p)
			}
			m[p] = n
		}
	}
	walk("")
	return m
}

// Diff lists, at most 10, the differences of two snapshots in type,
// mode, bytes and link target.
func Diff(want, got map[string]Node) []string {
	var d []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			d = append(d, fmt.Sprintf("%q missing", k))
		case !wok:
			d = append(d, fmt.Sprintf("%q extra (%v)", k, g.Mode))
		case w.Mode != g.Mode:
			d = append(d, fmt.Sprintf("%q mode %v, want %v", k, g.Mode, w.Mode))
		case w.Data != g.Data:
			d = append(d, fmt.Sprintf("%q bytes %.40q, want %.40q", k, g.Data, w.Data))
		case w.Link != g.Link:
			d = append(d, fmt.Sprintf("%q link %q, want %q", k, g.Link, w.Link))
		}
		if len(d) == 10 {
			d = append(d, "…")
			break
		}
	}
	return d
}

// Write writes a file of mode (its directories made), then sets mode
// whatever the umask.
func Write(t testing.TB, p, data string, mode fs.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), mode))
	require.NoError(t, os.Chmod(p, mode))
}

// Lost lists, at most 10, the entries of want that got lacks or holds
// otherwise (Diff, leaving got's extra entries out).
func Lost(want, got map[string]Node) []string {
	kept := map[string]Node{}
	for k := range want {
		if n, ok := got[k]; ok {
			kept[k] = n
		}
	}
	return Diff(want, kept)
}

// WriteDeep writes, below dir, a file whose relative path is exactly n
// bytes (n of 4,021 to 4,200): 20 directories of 200 bytes, then the
// file's name. It writes through os.Root, since dir's own path plus the
// file's is past what one system call may name. It returns the path.
func WriteDeep(t testing.TB, dir string, n int, data string) string {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	parts := make([]string, 20)
	for i := range parts {
		parts[i] = strings.Repeat("d", 200)
	}
	d := strings.Join(parts, "/")
	rel := d + "/" + strings.Repeat("f", n-len(d)-1)
	if err := r.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile(rel, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return rel
}
