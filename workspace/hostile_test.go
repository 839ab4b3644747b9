package workspace_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// hashOutside digests every entry under dir except the skipped
// subdirectories: what must not change.
func hashOutside(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s {
				return filepath.SkipDir
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// plantHostile fills the sandbox work tree with what must never come back.
func plantHostile(t *testing.T, e *env) {
	t.Helper()
	base := filepath.Dir(e.local)
	write(t, base, "outside/secret", "host secret\n")
	require.NoError(t, os.Symlink("/etc", filepath.Join(e.remote, "etc")))
	require.NoError(t, os.Symlink("../../outside", filepath.Join(e.remote, "up")))
	write(t, e.remote, "suid", "#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "suid"), fs.ModeSetuid|0o755))
	write(t, e.remote, "sgid", "group\n")
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "sgid"), fs.ModeSetgid|0o644))
	require.NoError(t, os.Link(filepath.Join(base, "outside/secret"), filepath.Join(e.remote, "hard")))
	write(t, e.remote, sandbox.RuntimeDir+"/evil", "runtime\n")
	require.NoError(t, syscall.Mkfifo(filepath.Join(e.remote, "fifo"), 0o644))
	require.NoError(t, os.Symlink("ok.txt", filepath.Join(e.remote, "inside-link")))
	write(t, e.remote, "ok.txt", "fine\n")
}

func TestHostileSandbox(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				plantHostile(t, e)
				base := filepath.Dir(e.local)
				before := hashOutside(t, base, e.local, filepath.Dir(e.remote))
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote)), "something outside the work tree changed")
				assert.Equal(t, []string{"etc", "fifo", "hard", "sgid", "suid", "up"}, res.Refused)
				assert.Equal(t, []string{sandbox.RuntimeDir + "/evil"}, res.Runtime, "the runtime directory's entries are listed apart")
				assert.NotContains(t, res.Reasons, sandbox.RuntimeDir+"/evil")
				for _, p := range []string{"etc", "up", "hard", "fifo", sandbox.RuntimeDir + "/evil"} {
					assert.False(t, exists(e.local, p), "%s was written", p)
				}
				// A setuid or setgid file is written without those bits
				// (and listed in Refused above).
				for p, want := range map[string]fs.FileMode{"suid": 0o755, "sgid": 0o644} {
					fi, err := os.Lstat(filepath.Join(e.local, p))
					require.NoError(t, err, "%s was not written", p)
					assert.Equal(t, want, fi.Mode(), "%s: mode", p)
				}
				assert.Equal(t, "#!/bin/sh\n", read(t, e.local, "suid"))
				assert.Equal(t, []string{"inside-link", "ok.txt", "sgid", "suid"}, res.Updated)
				assert.Equal(t, "fine\n", read(t, e.local, "ok.txt"))
				target, err := os.Readlink(filepath.Join(e.local, "inside-link"))
				require.NoError(t, err)
				assert.Equal(t, "ok.txt", target)
			})
		})
	}
}

// fakeRunner passes every command to a real Runner, except that inject may
// answer a command itself.
type fakeRunner struct {
	real   sandbox.Runner
	mu     sync.Mutex
	inject func(cmd sandbox.Command) (bool, error)
}

func (f *fakeRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	f.mu.Lock()
	inj := f.inject
	f.mu.Unlock()
	if inj != nil {
		if ok, err := inj(cmd); ok {
			return err
		}
	}
	return f.real.Run(ctx, cmd)
}

// restoreStream is a restore stream with report, tail and payload; a git
// stream's (its tail "nochange" or "bundle …") says its index is the
// baseline's (an empty staged section); a plain one's (its tail "tar" or
// "empty") ends with the end line.
func restoreStream(report string, tail string, payload []byte) []byte {
	staged := ""
	if tail == "nochange" || strings.HasPrefix(tail, "bundle ") {
		staged = "staged 0\n"
	}
	s := append([]byte(fmt.Sprintf("airlock-restore 1\nreport %d\n%s%s%s\n", len(report), report, staged, tail)), payload...)
	if tail == "tar" || tail == "empty" {
		s = append(s, plainEnd...)
	}
	return s
}

// plainEnd is the end line of a plain restore stream.
const plainEnd = "airlock-restore end\n"

func TestHostileTarStream(t *testing.T) {
	e, r := plainRoundRestoring(t, func(tw *tar.Writer) {
		for _, name := range []string{"../x", "/abs/x", "./" + sandbox.RuntimeDir + "/x", ".git/config", "d/../../x", "ok"} {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}))
			_, err := tw.Write([]byte("pwn"))
			require.NoError(t, err)
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}))
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	})
	base := filepath.Dir(e.local)
	before := hashOutside(t, base, e.local, filepath.Dir(e.remote))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote)))
	for _, p := range []string{"../x", "/abs/x", sandbox.RuntimeDir + "/x", ".git/config", "d/../../x", "hl", "dev"} {
		assert.Contains(t, res.Refused, p)
	}
	assert.Equal(t, []string{"ok"}, res.Updated)
	assert.False(t, exists(e.local, ".git"))
	assert.False(t, exists(e.local, sandbox.RuntimeDir+"/x"))
	assert.Equal(t, []string{"a"}, res.Deleted, "a is absent from a whole stream")
}

// plainRoundRestoring prepares a plain round of one file, "a", over a
// Runner whose restore command streams the tar members members writes.
func plainRoundRestoring(t *testing.T, members func(tw *tar.Writer)) (*env, *workspace.Round) {
	t.Helper()
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	fr := &fakeRunner{real: e.spec.Runner}
	e.spec.Runner = fr
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	members(tw)
	require.NoError(t, tw.Close())
	fr.inject = func(cmd sandbox.Command) (bool, error) {
		if !strings.Contains(cmd.Script, "airlock-restore") {
			return false, nil
		}
		_, err := cmd.Stdout.Write(restoreStream("", "tar", buf.Bytes()))
		return true, err
	}
	return e, r
}

// TestHostileTarDuplicateMember: a plain stream that names an entry twice
// (a sandbox's tar writes each once) takes the first member, refuses the
// second and lists it in Refused; a link second is never made.
func TestHostileTarDuplicateMember(t *testing.T) {
	e, r := plainRoundRestoring(t, func(tw *tar.Writer) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 6}))
		_, err := tw.Write([]byte("first\n"))
		require.NoError(t, err)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./a", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}))
	})
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Refused)
	assert.Equal(t, []string{"a"}, res.Updated)
	fi, err := os.Lstat(filepath.Join(e.local, "a"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the first member: a file, not the link")
	b, err := os.ReadFile(filepath.Join(e.local, "a"))
	require.NoError(t, err)
	assert.Equal(t, "first\n", string(b))
}

// TestHostileTarReservedReasons: an entry refused for its place says
// which place: the runtime directory (as a case-folding file system reads
// the name) or a .git component.
func TestHostileTarReservedReasons(t *testing.T) {
	_, r := plainRoundRestoring(t, func(tw *tar.Writer) {
		for _, name := range []string{"./.AIRLOCK/x", "./d/.Git/config", "./a"} {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 2}))
			_, err := tw.Write([]byte("1\n"))
			require.NoError(t, err)
		}
	})
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{".AIRLOCK/x", "d/.Git/config"}, res.Refused)
	assert.Contains(t, res.Reasons[".AIRLOCK/x"], "under the runtime directory .airlock")
	assert.Contains(t, res.Reasons["d/.Git/config"], "a .git component")
}

// TestMaxBytes: a plain sandbox's stream past WithMaxBytes is cut there:
// the Restore fails with ErrTooLarge naming the file, writes it not and
// deletes nothing (what follows in the stream was never seen); with the
// file gone, the next Restore completes.
func TestMaxBytes(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(10))
	require.NoError(t, err)
	write(t, e.remote, "big", strings.Repeat("b", 100))
	require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
	_, err = r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrTooLarge)
	assert.Contains(t, err.Error(), "(big is the one past the limit)")
	assert.False(t, exists(e.local, "big"))
	assert.True(t, exists(e.local, "a"), "a truncated stream deletes nothing")

	require.NoError(t, os.Remove(filepath.Join(e.remote, "big")))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Deleted)
	assert.False(t, exists(e.local, "a"))
}

// TestHostileBundle feeds crafted bundles through a fake Runner: tree
// entries named ../x, "..", .GIT, in the snapshot or in the sandbox's
// commits, refs named to escape, an extra ref, a broken pack. A bad entry
// or ref is listed in Refused and never written, the rest of the work tree
// arrives; commits that hold a bad entry are not integrated (the local
// HEAD stays, their content arrives through the snapshot) and none of
// their objects enters the repository; clean commits beside a bad
// snapshot entry still are. A bundle that is not one fails closed with
// ErrHostile. Nothing outside the work tree changes, and nothing received
// is kept.
func TestHostileBundle(t *testing.T) {
	type crafted struct {
		tail    string // the restore stream's tail line
		payload []byte // the bundle
	}
	for _, tc := range []struct {
		name             string
		craft            func(t *testing.T, c *crafter) crafted
		err              string // the error's exact start; "" for a result
		refused, updated []string
		commits          int // commits integrated
	}{
		{name: "dotdot path in the snapshot", refused: []string{"../x"}, updated: []string{"b"},
			craft: func(t *testing.T, c *crafter) crafted {
				snap := c.commit(c.tree(entry{"100644", "../x", c.x}, entry{"100644", "a", c.one}, entry{"100644", "b", c.x}), c.head)
				return crafted{"bundle " + c.head + " " + snap, c.bundle(snap, c.head)}
			}},
		{name: "dotdot tree in the snapshot", refused: []string{"../x"}, updated: []string{"b"},
			craft: func(t *testing.T, c *crafter) crafted {
				up := c.tree(entry{"100644", "x", c.x})
				snap := c.commit(c.tree(entry{"40000", "..", up}, entry{"100644", "a", c.one}, entry{"100644", "b", c.x}), c.head)
				return crafted{"bundle " + c.head + " " + snap, c.bundle(snap, c.head)}
			}},
		{name: "dotdot in the commits", refused: []string{"../x"}, updated: []string{"c"},
			craft: func(t *testing.T, c *crafter) crafted {
				up := c.tree(entry{"100644", "x", c.x})
				evil := c.commit(c.tree(entry{"40000", "..", up}, entry{"100644", "a", c.one}, entry{"100644", "c", c.x}), c.head)
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "c", c.x}), evil)
				return crafted{"bundle " + evil + " " + snap, c.bundle(snap, c.head)}
			}},
		{name: "dotgit in a commit's subdirectory", refused: []string{"sub/.GIT/hooks/post-checkout"}, updated: []string{"c"},
			craft: func(t *testing.T, c *crafter) crafted {
				hooks := c.tree(entry{"100755", "post-checkout", c.x})
				sub := c.tree(entry{"40000", ".GIT", c.tree(entry{"40000", "hooks", hooks})})
				evil := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"40000", "sub", sub}), c.head)
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "c", c.x}), evil)
				return crafted{"bundle " + evil + " " + snap, c.bundle(snap, c.head)}
			}},
		{name: "clean commits beside a bad snapshot entry", refused: []string{"../x"}, updated: []string{"c"}, commits: 1,
			craft: func(t *testing.T, c *crafter) crafted {
				good := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "c", c.x}), c.head)
				snap := c.commit(c.tree(entry{"100644", "../x", c.x}, entry{"100644", "a", c.one}, entry{"100644", "c", c.x}), good)
				return crafted{"bundle " + good + " " + snap, c.bundle(snap, c.head)}
			}},
		{name: "ref name", refused: []string{"refs/airlock/out/../x"}, updated: []string{"x"},
			craft: func(t *testing.T, c *crafter) crafted {
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "x", c.x}), c.head)
				data := bytes.Replace(c.bundle(snap, c.head), []byte(c.out), []byte("refs/airlock/out/../x"), 1)
				return crafted{"bundle " + c.head + " " + snap, data}
			}},
		{name: "extra ref", refused: []string{"refs/heads/../../x"}, updated: []string{"x"},
			craft: func(t *testing.T, c *crafter) crafted {
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "x", c.x}), c.head)
				data := c.bundle(snap, c.head)
				end := bytes.Index(data, []byte("\n\nPACK"))
				require.Positive(t, end)
				return crafted{"bundle " + c.head + " " + snap, slices.Concat(data[:end+1], []byte(snap+" refs/heads/../../x\n"), data[end+1:])}
			}},
		{name: "broken pack", err: "sandbox sent invalid data: the sandbox's bundle ",
			craft: func(t *testing.T, c *crafter) crafted {
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "x", c.x}), c.head)
				data := c.bundle(snap, c.head)
				return crafted{"bundle " + c.head + " " + snap, data[:len(data)-24]}
			}},
		{name: "snapshot not in the bundle", err: "sandbox sent invalid data: the sandbox's bundle is incomplete",
			craft: func(t *testing.T, c *crafter) crafted {
				snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "x", c.x}), c.head)
				other := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"100644", "y", c.x}), c.head)
				return crafted{"bundle " + c.head + " " + snap, c.bundle(other, c.head)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			fr := &fakeRunner{real: e.spec.Runner}
			e.spec.Runner = fr
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			c := newCrafter(t, e.local, "refs/airlock/out/"+r.ID()+"/snap")
			cr := tc.craft(t, c)
			fr.inject = func(cmd sandbox.Command) (bool, error) {
				if !strings.Contains(cmd.Script, "airlock-restore") {
					return false, nil
				}
				_, err := cmd.Stdout.Write(restoreStream("", cr.tail, asRun(t, cmd.Script, c.out, cr.payload)))
				return true, err
			}
			base := filepath.Dir(e.local)
			before := hashOutside(t, base, e.local, filepath.Dir(e.remote), c.dir)
			refs := git(t, e.local, "for-each-ref")
			res, err := r.Restore(ctx(t))
			assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote), c.dir), "something outside the work tree changed")
			assert.False(t, exists(base, "x"), "../x was written")
			assert.False(t, exists(e.local, "sub"), "sub/.GIT was written")
			if tc.err != "" {
				require.ErrorIs(t, err, workspace.ErrHostile)
				require.ErrorIs(t, err, sandbox.ErrProtocol, "ErrHostile is the protocol class")
				assert.NotErrorIs(t, err, sandbox.ErrTransport)
				assert.True(t, strings.HasPrefix(err.Error(), tc.err), "error %q does not start with %q", err, tc.err)
				assert.Equal(t, refs, git(t, e.local, "for-each-ref"))
				assert.Equal(t, c.head+"\n", git(t, e.local, "rev-parse", "HEAD"))
				assert.Equal(t, "", git(t, e.local, "status", "--porcelain"), "nothing was written")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.refused, res.Refused)
				assert.Equal(t, tc.updated, res.Updated)
				assert.Nil(t, res.Deleted)
				assert.Equal(t, tc.commits, res.Commits)
				if tc.commits == 0 {
					assert.Equal(t, refs, git(t, e.local, "for-each-ref"), "refused commits moved a ref")
					assert.Equal(t, c.head, res.Head)
				} else {
					assert.NotEqual(t, c.head, res.Head)
				}
				assert.Equal(t, res.Head+"\n", git(t, e.local, "rev-parse", "HEAD"))
				for _, p := range tc.updated {
					assert.Equal(t, "x\n", read(t, e.local, p))
				}
			}
			// No object git's strict fsck refuses entered the repository,
			// reachable or not.
			git(t, e.local, "fsck", "--strict", "--no-progress")
			state, err := os.ReadDir(filepath.Join(e.local, ".git", "airlock", "rounds"))
			require.NoError(t, err)
			require.Len(t, state, 1, "a received bundle or a quarantine was kept")
			assert.Equal(t, r.ID()+".json", state[0].Name())
		})
	}
}

// entry is one entry of a crafted tree object.
type entry struct{ mode, name, id string }

// crafter writes hostile objects in a scratch clone of a work tree.
type crafter struct {
	t        *testing.T
	dir, out string // the clone; the ref a restore bundle must hold
	head     string // the local HEAD
	one, x   string // blobs "1\n" and "x\n"
}

// asRun names a crafted bundle's ref out ("refs/airlock/out/<id>/snap")
// as the restore run of script asks for it: with a pid and the run's
// token.
func asRun(t *testing.T, script, out string, bundle []byte) []byte {
	t.Helper()
	_, rest, ok := strings.Cut(script, "; tok=")
	require.True(t, ok, "the restore script names no token")
	tok, _, _ := strings.Cut(rest, "\n")
	tok = strings.Trim(tok, "'")
	return bytes.Replace(bundle, []byte(out), []byte(strings.TrimSuffix(out, "/snap")+"/1-"+tok+"/snap"), 1)
}

func newCrafter(t *testing.T, local, out string) *crafter {
	scratch := t.TempDir()
	git(t, scratch, "clone", "-q", local, "s")
	c := &crafter{t: t, dir: filepath.Join(scratch, "s"), out: out, head: strings.TrimSpace(git(t, local, "rev-parse", "HEAD"))}
	c.one = strings.TrimSpace(gitIn(t, c.dir, "1\n", "hash-object", "-w", "--stdin"))
	c.x = strings.TrimSpace(gitIn(t, c.dir, "x\n", "hash-object", "-w", "--stdin"))
	return c
}

// tree writes a tree object of the entries, as given (unchecked).
func (c *crafter) tree(ents ...entry) string {
	var b []byte
	for _, e := range ents {
		raw, err := hex.DecodeString(e.id)
		require.NoError(c.t, err)
		b = append(append(b, e.mode+" "+e.name+"\x00"...), raw...)
	}
	return strings.TrimSpace(gitIn(c.t, c.dir, string(b), "hash-object", "-t", "tree", "--literally", "-w", "--stdin"))
}

func (c *crafter) commit(tree, parent string) string {
	return strings.TrimSpace(git(c.t, c.dir, "commit-tree", tree, "-p", parent, "-m", "evil"))
}

// bundle returns a bundle of snap under the restore's ref, without what
// the local HEAD has.
func (c *crafter) bundle(snap, have string) []byte {
	git(c.t, c.dir, "update-ref", c.out, snap)
	p := filepath.Join(filepath.Dir(c.dir), "b")
	git(c.t, c.dir, "bundle", "create", "-q", p, c.out, "^"+have)
	data, err := os.ReadFile(p)
	require.NoError(c.t, err)
	return data
}

func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Run(), "git %v", args)
	return out.String()
}

// TestRuntimeDirLinkRefused: a sandbox whose runtime directory is a link
// to a directory elsewhere, or a regular file, gets ".airlock" listed in
// Refused (not in Runtime: it is no entry of a runtime directory) and the
// rest restored; nothing of the link's target comes back.
func TestRuntimeDirLinkRefused(t *testing.T) {
	for _, c := range []struct {
		kind   string
		asFile bool // the runtime directory replaced by a regular file, not a link
	}{{"git", false}, {"plain", false}, {"git", true}, {"plain", true}} {
		kind, asFile := c.kind, c.asFile
		name := kind
		if asFile {
			name += "/file"
		}
		t.Run(name, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				elsewhere := filepath.Join(filepath.Dir(e.remote), "elsewhere")
				write(t, elsewhere, "loot", "loot\n")
				require.NoError(t, os.RemoveAll(filepath.Join(e.remote, sandbox.RuntimeDir)))
				if asFile {
					write(t, e.remote, sandbox.RuntimeDir, "not a directory\n")
				} else {
					require.NoError(t, os.Symlink(elsewhere, filepath.Join(e.remote, sandbox.RuntimeDir)))
				}
				write(t, e.remote, "a", "2\n")
				res, err := r.Restore(ctx(t))
				if kind == "plain" {
					// The round's mark went with the runtime directory: as a
					// git round whose refs/airlock/base went, the sandbox
					// no longer shows it holds the round, and nothing is
					// read or changed.
					require.Error(t, err)
					assert.ErrorContains(t, err, "does not hold round "+r.ID())
					assert.Equal(t, "1\n", read(t, e.local, "a"))
					assert.False(t, exists(e.local, sandbox.RuntimeDir))
					return
				}
				require.NoError(t, err)
				assert.Equal(t, []string{sandbox.RuntimeDir}, res.Refused)
				assert.Contains(t, res.Reasons[sandbox.RuntimeDir], "not a directory")
				assert.Empty(t, res.Runtime, "a runtime directory that is not one is refused, not listed as runtime")
				assert.Equal(t, []string{"a"}, res.Updated)
				assert.False(t, exists(e.local, sandbox.RuntimeDir+"/loot"))
			})
		})
	}
}

// TestHostileSandboxCommits: the agent's sandbox repository itself holds a
// commit whose tree has an entry named ".." (written with hash-object
// --literally, as a hostile agent could). Over every runner: the commit is
// refused and its path listed, the local HEAD stays, the agent's work tree
// edits still arrive, and no object of the commit enters the repository.
func TestHostileSandboxCommits(t *testing.T) {
	eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
		e := newEnv(t, newRunner)
		r := prepareOneFile(t, e, "git")
		head := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
		c := &crafter{t: t, dir: e.remote}
		c.x = strings.TrimSpace(gitIn(t, e.remote, "x\n", "hash-object", "-w", "--stdin"))
		one := strings.TrimSpace(gitIn(t, e.remote, "1\n", "hash-object", "-w", "--stdin"))
		up := c.tree(entry{"100644", "x", c.x})
		evil := c.commit(c.tree(entry{"40000", "..", up}, entry{"100644", "a", one}), head)
		git(t, e.remote, "update-ref", "refs/heads/main", evil)
		write(t, e.remote, "new.txt", "agent\n")
		res, err := r.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, []string{"../x"}, res.Refused)
		assert.Equal(t, []string{"new.txt"}, res.Updated)
		assert.Equal(t, 0, res.Commits)
		assert.Equal(t, head, res.Head)
		assert.Equal(t, head+"\n", git(t, e.local, "rev-parse", "HEAD"))
		assert.Equal(t, "agent\n", read(t, e.local, "new.txt"))
		assert.False(t, exists(filepath.Dir(e.local), "x"), "../x was written")
		git(t, e.local, "fsck", "--strict", "--no-progress")
		_, err = exec.Command("git", "-C", e.local, "cat-file", "-e", evil).CombinedOutput()
		assert.Error(t, err, "the refused commit entered the repository")
	})
}

// TestDotGitSpellingsRefused: names that a case-folding or HFS+ or NTFS
// file system reads as .git (or as the runtime directory) never come back
// from a sandbox, which may run on a file system where they are ordinary
// directories.
func TestDotGitSpellingsRefused(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) sandbox.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				evil := []string{".GIT./hooks/post-checkout", "GIT~1/config", "sub/.g\u200cit/hooks/pre-commit", ".Airlock /skills/x"}
				for _, p := range evil {
					write(t, e.remote, p, "#!/bin/sh\necho pwned\n")
				}
				write(t, e.remote, "fine.txt", "fine\n")
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				for _, p := range evil {
					// The entry, or a directory above it (a plain restore
					// refuses a reserved directory whole).
					listed := false
					for q := p; q != "."; q = path.Dir(q) {
						listed = listed || slices.Contains(res.Refused, q)
					}
					assert.True(t, listed, "%q is not in Refused %q", p, res.Refused)
					assert.False(t, exists(e.local, p), "%s was written", p)
				}
				assert.Equal(t, []string{"fine.txt"}, res.Updated)
			})
		})
	}
}
