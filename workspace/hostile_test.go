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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
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
	write(t, e.remote, stage.RuntimeDir+"/evil", "runtime\n")
	require.NoError(t, syscall.Mkfifo(filepath.Join(e.remote, "fifo"), 0o644))
	require.NoError(t, os.Symlink("ok.txt", filepath.Join(e.remote, "inside-link")))
	write(t, e.remote, "ok.txt", "fine\n")
}

func TestHostileSandbox(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) stage.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				plantHostile(t, e)
				base := filepath.Dir(e.local)
				before := hashOutside(t, base, e.local, filepath.Dir(e.remote))
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote)), "something outside the work tree changed")
				assert.Equal(t, []string{stage.RuntimeDir + "/evil", "etc", "fifo", "hard", "sgid", "suid", "up"}, res.Refused)
				for _, p := range []string{"etc", "up", "hard", "fifo", stage.RuntimeDir + "/evil"} {
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
	real   stage.Runner
	mu     sync.Mutex
	inject func(cmd stage.Command) (bool, error)
}

func (f *fakeRunner) Run(ctx context.Context, cmd stage.Command) error {
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

func restoreStream(report string, tail string, payload []byte) []byte {
	return append([]byte(fmt.Sprintf("airlock-restore 1\nreport %d\n%s%s\n", len(report), report, tail)), payload...)
}

func TestHostileTarStream(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) stage.Runner { return stage.LocalRunner(dir) })
	fr := &fakeRunner{real: e.spec.Runner}
	e.spec.Runner = fr
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"../x", "/abs/x", "./" + stage.RuntimeDir + "/x", ".git/config", "d/../../x", "ok"} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}))
		_, err := tw.Write([]byte("pwn"))
		require.NoError(t, err)
	}
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}))
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	require.NoError(t, tw.Close())
	fr.inject = func(cmd stage.Command) (bool, error) {
		if !strings.Contains(cmd.Script, "airlock-restore") {
			return false, nil
		}
		_, err := cmd.Stdout.Write(restoreStream("", "tar", buf.Bytes()))
		return true, err
	}
	base := filepath.Dir(e.local)
	before := hashOutside(t, base, e.local, filepath.Dir(e.remote))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, before, hashOutside(t, base, e.local, filepath.Dir(e.remote)))
	for _, p := range []string{"../x", "/abs/x", stage.RuntimeDir + "/x", ".git/config", "d/../../x", "hl", "dev"} {
		assert.Contains(t, res.Refused, p)
	}
	assert.Equal(t, []string{"ok"}, res.Updated)
	assert.False(t, exists(e.local, ".git"))
	assert.False(t, exists(e.local, stage.RuntimeDir+"/x"))
	assert.Equal(t, []string{"a"}, res.Deleted, "a is absent from a whole stream")
}

func TestMaxBytes(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) stage.Runner { return stage.LocalRunner(dir) })
	write(t, e.local, "a", "1\n")
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithMaxBytes(10))
	require.NoError(t, err)
	write(t, e.remote, "big", strings.Repeat("b", 100))
	require.NoError(t, os.Remove(filepath.Join(e.remote, "a")))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Contains(t, res.Refused, "big")
	assert.False(t, exists(e.local, "big"))
	assert.True(t, exists(e.local, "a"), "a truncated stream deletes nothing")
}

// TestHostileBundle feeds crafted bundles: refs named to escape, an extra
// ref, and tree entries named ../x and "..". Each fails the whole restore
// closed with ErrHostile, naming what is wrong; nothing outside the work
// tree, in it, or in its refs changes, and no received bundle is kept.
func TestHostileBundle(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) stage.Runner { return stage.LocalRunner(dir) })
	fr := &fakeRunner{real: e.spec.Runner}
	e.spec.Runner = fr
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	r, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	head := strings.TrimSpace(git(t, e.local, "rev-parse", "HEAD"))
	scratch := t.TempDir()
	git(t, scratch, "clone", "-q", e.local, "s")
	s := filepath.Join(scratch, "s")
	blob := strings.TrimSpace(gitIn(t, s, "x\n", "hash-object", "-w", "--stdin"))
	raw, err := hex.DecodeString(blob)
	require.NoError(t, err)
	out := "refs/airlock/out/" + r.ID() + "/snap"
	// bundle writes a bundle of a commit (parent head) of a tree with one
	// entry named name, under out.
	bundle := func(name string) (commit, tree string, data []byte) {
		tree = strings.TrimSpace(gitIn(t, s, string(append([]byte("100644 "+name+"\x00"), raw...)), "hash-object", "-t", "tree", "--literally", "-w", "--stdin"))
		commit = strings.TrimSpace(git(t, s, "commit-tree", tree, "-p", head, "-m", "evil"))
		git(t, s, "update-ref", out, commit)
		p := filepath.Join(scratch, "b")
		git(t, s, "bundle", "create", p, out, "^"+head)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		return commit, tree, data
	}
	evil, evilTree, dotdotPath := bundle("../x")
	dotdot, dotdotTree, dotdotName := bundle("..")
	sane, _, saneData := bundle("x")
	renamed := bytes.Replace(saneData, []byte(out), []byte("refs/airlock/out/../x"), 1)
	end := bytes.Index(saneData, []byte("\n\nPACK"))
	require.Positive(t, end)
	extra := slices.Concat(saneData[:end+1], []byte(sane+" refs/heads/../../x\n"), saneData[end+1:])
	const fsck = "sandbox sent invalid data: the sandbox's bundle fails fsck: git index-pack --stdin --fix-thin --strict exited with status 128: error: object "

	for _, tc := range []struct {
		name, snap string
		payload    []byte
		msg        string // the error's exact start
	}{
		{"dotdot path", evil, dotdotPath, fsck + evilTree + ": fullPathname: contains full pathnames"},
		{"dotdot name", dotdot, dotdotName, fsck + dotdotTree + ": hasDotdot: contains '..'"},
		{"ref name", sane, renamed, "sandbox sent invalid data: the sandbox's bundle does not hold exactly " + out + " at " + sane},
		{"extra ref", sane, extra, "sandbox sent invalid data: the sandbox's bundle does not hold exactly " + out + " at " + sane},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr.inject = func(cmd stage.Command) (bool, error) {
				if !strings.Contains(cmd.Script, "airlock-restore") {
					return false, nil
				}
				_, err := cmd.Stdout.Write(restoreStream("", "bundle "+head+" "+tc.snap, tc.payload))
				return true, err
			}
			base := filepath.Dir(e.local)
			before := hashOutside(t, base, filepath.Join(e.local, ".git"), filepath.Dir(e.remote), scratch)
			refs := git(t, e.local, "for-each-ref")
			_, err := r.Restore(ctx(t))
			require.ErrorIs(t, err, workspace.ErrHostile)
			assert.True(t, strings.HasPrefix(err.Error(), tc.msg), "error %q does not start with %q", err, tc.msg)
			assert.Equal(t, before, hashOutside(t, base, filepath.Join(e.local, ".git"), filepath.Dir(e.remote), scratch))
			assert.Equal(t, refs, git(t, e.local, "for-each-ref"))
			assert.Equal(t, head+"\n", git(t, e.local, "rev-parse", "HEAD"))
			assert.False(t, exists(base, "x"), "../x was written")
			state, err := os.ReadDir(filepath.Join(e.local, ".git", "airlock", "rounds"))
			require.NoError(t, err)
			require.Len(t, state, 1, "a received bundle was kept")
			assert.Equal(t, r.ID()+".json", state[0].Name())
		})
	}
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
// Refused and the rest restored; nothing of the link's target comes back.
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
			eachRunner(t, func(t *testing.T, newRunner func(t *testing.T, dir string) stage.Runner) {
				e := newEnv(t, newRunner)
				r := prepareOneFile(t, e, kind)
				elsewhere := filepath.Join(filepath.Dir(e.remote), "elsewhere")
				write(t, elsewhere, "loot", "loot\n")
				require.NoError(t, os.RemoveAll(filepath.Join(e.remote, stage.RuntimeDir)))
				if asFile {
					write(t, e.remote, stage.RuntimeDir, "not a directory\n")
				} else {
					require.NoError(t, os.Symlink(elsewhere, filepath.Join(e.remote, stage.RuntimeDir)))
				}
				write(t, e.remote, "a", "2\n")
				res, err := r.Restore(ctx(t))
				require.NoError(t, err)
				assert.Equal(t, []string{stage.RuntimeDir}, res.Refused)
				assert.Equal(t, []string{"a"}, res.Updated)
				assert.False(t, exists(e.local, stage.RuntimeDir+"/loot"))
			})
		})
	}
}
