package deliverable_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// workspaceFactory makes a Workspace whose root is the host directory dir,
// reached however the implementation reaches it. Every Workspace test runs
// once per factory, so a new transport (an SSH runner, a container exec)
// joins by adding one entry to workspaceFactories.
type workspaceFactory struct {
	name string
	make func(t *testing.T, dir string) deliverable.Workspace
}

func workspaceFactories() []workspaceFactory {
	return []workspaceFactory{
		{"local", local},
		{"remote over sh", func(t *testing.T, dir string) deliverable.Workspace {
			return deliverable.RemoteWorkspace(sandbox.Local(t.TempDir()), dir)
		}},
		{"remote over sh, root relative to the runner", func(t *testing.T, dir string) deliverable.Workspace {
			return deliverable.RemoteWorkspace(sandbox.Local(dir), "")
		}},
		{"remote over SSH (remotetest)", func(t *testing.T, dir string) deliverable.Workspace {
			srv := remotetest.NewServer(t)
			h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Close() })
			return deliverable.RemoteWorkspace(h, dir)
		}},
	}
}

// buildTree creates entries under dir from a tiny fixture language:
// "d/" a directory, "f" a file holding "content of f", "a => b" a symbolic
// link to b (relative to a's directory; "$OUT" is replaced by outside),
// "h == f" a hard link to f, "p|" a FIFO.
func buildTree(t *testing.T, dir, outside string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		switch {
		case strings.Contains(e, " => "):
			name, target, _ := strings.Cut(e, " => ")
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(strings.ReplaceAll(target, "$OUT", outside), p))
		case strings.Contains(e, " == "):
			name, target, _ := strings.Cut(e, " == ")
			require.NoError(t, os.Link(filepath.Join(dir, filepath.FromSlash(target)), filepath.Join(dir, filepath.FromSlash(name))))
		case strings.HasSuffix(e, "/"):
			require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.FromSlash(e)), 0o755))
		case strings.HasSuffix(e, "|"):
			p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(e, "|")))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		default:
			writeFile(t, dir, e, []byte("content of "+e))
		}
	}
}

// openCase is one Workspace.Open case. Cases marked "fails even without
// confinement" would fail for the right reason only, so an escape test cannot
// pass because the name was bad in some other way.
type openCase struct {
	name    string
	tree    []string
	open    string
	want    error  // nil: opens
	links   uint64 // when it opens
	content string // when it opens; "" means "content of " + open
}

func openCases() []openCase {
	return []openCase{
		{name: "file at the root", tree: []string{"r.csv"}, open: "r.csv", links: 1},
		{name: "nested file", tree: []string{"a/b/c.csv"}, open: "a/b/c.csv", links: 1},
		{name: "quotes, spaces and a leading dash", tree: []string{`-d it's/-f "x" $y.csv`}, open: `-d it's/-f "x" $y.csv`, links: 1},
		{name: "hard link is reported", tree: []string{"r.csv", "h.csv == r.csv"}, open: "h.csv", links: 2, content: "content of r.csv"},
		{name: "symlink leaf to a workspace file (fails even without confinement)", tree: []string{"real.csv", "link.csv => real.csv"}, open: "link.csv", want: deliverable.ErrSymlinkDenied},
		{name: "symlink leaf to an outside file", tree: []string{"link.csv => $OUT/secret.csv"}, open: "link.csv", want: deliverable.ErrSymlinkDenied},
		{name: "dangling symlink leaf", tree: []string{"link.csv => nowhere.csv"}, open: "link.csv", want: deliverable.ErrSymlinkDenied},
		{name: "symlink directory to a workspace dir (fails even without confinement)", tree: []string{"real/r.csv", "d => real"}, open: "d/r.csv", want: deliverable.ErrSymlinkDenied},
		{name: "symlink directory to an outside dir", tree: []string{"d => $OUT"}, open: "d/secret.csv", want: deliverable.ErrSymlinkDenied},
		{name: "symlink deep in the path", tree: []string{"a/b/real/r.csv", "a/b/c => real"}, open: "a/b/c/r.csv", want: deliverable.ErrSymlinkDenied},
		{name: "directory", tree: []string{"dir/"}, open: "dir", want: deliverable.ErrPathDenied},
		{name: "FIFO", tree: []string{"pipe.csv|"}, open: "pipe.csv", want: deliverable.ErrPathDenied},
		{name: "file as a directory", tree: []string{"f.csv"}, open: "f.csv/x.csv", want: deliverable.ErrPathDenied},
		{name: "missing leaf", tree: []string{"d/"}, open: "d/nope.csv", want: fs.ErrNotExist},
		{name: "missing directory", tree: nil, open: "nope/r.csv", want: fs.ErrNotExist},
		{name: "dot-dot (fails even without confinement)", tree: []string{"a/r.csv"}, open: "a/../a/r.csv", want: deliverable.ErrPathDenied},
		{name: "dot-dot out", tree: nil, open: "../outside/secret.csv", want: deliverable.ErrPathDenied},
		{name: "absolute", tree: []string{"r.csv"}, open: "/etc/passwd", want: deliverable.ErrPathDenied},
		{name: "unclean", tree: []string{"r.csv"}, open: "./r.csv", want: deliverable.ErrPathDenied},
		{name: "empty", tree: nil, open: "", want: deliverable.ErrPathDenied},
	}
}

func TestWorkspaceOpen(t *testing.T) {
	for _, wf := range workspaceFactories() {
		t.Run(wf.name, func(t *testing.T) {
			for _, tc := range openCases() {
				t.Run(tc.name, func(t *testing.T) {
					base := t.TempDir()
					dir, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
					require.NoError(t, os.Mkdir(dir, 0o755))
					buildTree(t, outside, outside, "secret.csv")
					buildTree(t, dir, outside, tc.tree...)
					ws := wf.make(t, dir)

					f, err := ws.Open(t.Context(), tc.open)
					if tc.want != nil {
						require.ErrorIs(t, err, tc.want)
						var pe *fs.PathError
						require.ErrorAs(t, err, &pe)
						assert.Equal(t, tc.open, pe.Path)
						assert.Nil(t, f)
						return
					}
					require.NoError(t, err)
					t.Cleanup(func() { assert.NoError(t, f.Close()) })
					want := tc.content
					if want == "" {
						want = "content of " + tc.open
					}
					st := f.Stat()
					assert.True(t, st.Mode.IsRegular())
					assert.Equal(t, int64(len(want)), st.Size)
					assert.Equal(t, tc.links, st.Links)
					got, err := io.ReadAll(f)
					require.NoError(t, err)
					assert.Equal(t, want, string(got))
				})
			}
		})
	}
}

// TestWorkspaceDetectsChangeDuringRead changes the file after part of it
// was read; the read must fail with ErrFileChanged, not return io.EOF.
func TestWorkspaceDetectsChangeDuringRead(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (4<<20)/16) // 4 MiB: more than any pipe buffer
	changes := []struct {
		name   string
		change func(t *testing.T, p string)
	}{
		{"append", func(t *testing.T, p string) {
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = w.Write([]byte("more"))
			require.NoError(t, errors.Join(err, w.Close()))
		}},
		{"truncate", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 10)) }},
		{"rewrite in place, same size, time restored", func(t *testing.T, p string) {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond) // a change time the second stat can tell apart
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = w.WriteAt(bytes.Repeat([]byte("B"), 16), int64(len(data)-16))
			require.NoError(t, errors.Join(err, w.Close()))
			require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		}},
		{"replaced by another file", func(t *testing.T, p string) {
			tmp := p + ".new"
			require.NoError(t, os.WriteFile(tmp, data, 0o644))
			require.NoError(t, os.Rename(tmp, p))
		}},
	}
	for _, wf := range workspaceFactories() {
		for _, ch := range changes {
			t.Run(wf.name+"/"+ch.name, func(t *testing.T) {
				dir := t.TempDir()
				p := writeFile(t, dir, "big.bin", data)
				f, err := wf.make(t, dir).Open(t.Context(), "big.bin")
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, f.Close()) })
				_, err = io.ReadFull(f, make([]byte, 1<<20))
				require.NoError(t, err)
				ch.change(t, p)
				_, err = io.Copy(io.Discard, f)
				assert.ErrorIs(t, err, deliverable.ErrFileChanged)
			})
		}
	}
}

// TestRegisterOverEveryWorkspace registers through each factory: the same
// request gives the same receipt, and the agent's rejections are the same.
func TestRegisterOverEveryWorkspace(t *testing.T) {
	data := []byte("a,b\n1,2\n")
	for _, wf := range workspaceFactories() {
		t.Run(wf.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "out/r.csv", data)
			require.NoError(t, os.Symlink("out", filepath.Join(f.ws, "link")))
			require.NoError(t, os.Link(writeFile(t, f.ws, "other.csv", data), filepath.Join(f.ws, "h.csv")))
			ws := wf.make(t, f.ws)

			rc, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("out/r.csv", "k1", data))
			require.NoError(t, err)
			assert.Equal(t, deliverable.Applied, rc.Disposition)
			assert.Equal(t, sum(data), rc.SHA256)

			for _, tc := range []struct {
				ref   string
				want  error
				field string
			}{
				{"link/r.csv", deliverable.ErrSymlinkDenied, "contentRef"},
				{"h.csv", deliverable.ErrHardlinkDenied, "contentRef"},
				{"out", deliverable.ErrPathDenied, "contentRef"},
				{"out/none.csv", fs.ErrNotExist, "contentRef"},
			} {
				req := requestFor(tc.ref, "k-"+tc.ref, data)
				req.Filename = filepath.Base(tc.ref)
				_, err := f.reg.Register(t.Context(), ws, "t", "r", req)
				require.ErrorIs(t, err, tc.want, tc.ref)
				var re *deliverable.RequestError
				require.ErrorAs(t, err, &re, tc.ref)
				assert.Equal(t, tc.field, re.Field)
			}
			assert.Len(t, filesUnder(t, f.fs, f.dir, "attachments"), 1)
		})
	}
}

func TestLocalWorkspaceRejectsBadRoots(t *testing.T) {
	file := writeFile(t, t.TempDir(), "f", []byte("x"))
	for _, dir := range []string{"relative/dir", filepath.Join(t.TempDir(), "missing"), file} {
		_, err := deliverable.LocalWorkspace(dir)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe, dir)
		assert.Equal(t, dir, pe.Path)
	}
}

func TestRemoteWorkspaceRootMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	ws := deliverable.RemoteWorkspace(sandbox.Local(t.TempDir()), missing)
	f := newFixture(t)
	_, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("r.csv", "k", []byte("x")))
	var he *deliverable.HostError
	require.ErrorAs(t, err, &he)
	assert.ErrorContains(t, err, "the remote workspace root "+missing+" cannot be entered in the sandbox")
	assert.ErrorContains(t, err, "pass RemoteWorkspace the sandbox's workspace directory")
	var re *deliverable.RequestError
	assert.False(t, errors.As(err, &re), "a missing workspace root is the host's problem")
}
