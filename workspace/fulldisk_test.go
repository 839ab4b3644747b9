package workspace_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// mountTmpfs mounts a tmpfs of size (mount's syntax, e.g. "8m") at dir,
// unmounted at cleanup; it skips the test when not root or when the mount
// fails.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounting a small tmpfs to fill it up")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs at %s failed (%v: %s): the full-disk test needs it", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// localOnTmpfs moves e's local work tree onto a new tmpfs of size (root
// only: see mountTmpfs), beside the sandbox, and returns the mount point.
func localOnTmpfs(t *testing.T, e *env, size string) string {
	t.Helper()
	mnt := filepath.Join(filepath.Dir(e.local), "mnt")
	mountTmpfs(t, mnt, size)
	e.local = filepath.Join(mnt, "local")
	e.spec.Local = e.local
	require.NoError(t, os.MkdirAll(e.local, 0o755))
	return mnt
}

// fill writes a file in dir until the file system is full, then frees
// leave bytes of it, and returns its path.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := f.Write(buf)
		n += int64(m)
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, f.Close())
	require.NoError(t, os.Truncate(p, max(n-leave, 0)))
	return p
}

func randomBytes(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return string(b)
}

// agentWork makes the sandbox commit one large file and leave another
// uncommitted, and returns what each path must hold afterwards.
func agentWork(t *testing.T, e *env, kind string, size int) map[string]string {
	t.Helper()
	want := map[string]string{"committed.bin": randomBytes(t, size), "dirty.bin": randomBytes(t, size), "a": "agent edit\n"}
	for p, c := range want {
		write(t, e.remote, p, c)
	}
	if kind == "git" {
		git(t, e.remote, "add", "committed.bin")
		git(t, e.remote, "commit", "-q", "-m", "agent commit")
	}
	return want
}

func assertArrived(t *testing.T, e *env, want map[string]string) {
	t.Helper()
	for p, c := range want {
		assert.True(t, c == read(t, e.local, p), "%s did not arrive whole", p)
	}
}

// isNoSpace reports a full disk, as a Go write error or as git's message.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "No space left on device")
}

// TestRestoreFullWorkTree: the host work tree is on a tmpfs too small for
// the agent's files (the repository is not): Restore fails with ENOSPC
// naming the file, HEAD and every ref stay, and once space is freed a
// second Restore brings everything, committed and uncommitted.
func TestRestoreFullWorkTree(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			mnt := localOnTmpfs(t, e, "4m")
			var opts []workspace.Option
			if kind == "git" {
				git(t, e.local, "init", "-q", "-b", "main", "--separate-git-dir", filepath.Join(filepath.Dir(mnt), "gitdir"))
				write(t, e.local, "a", "1\n")
				git(t, e.local, "add", "a")
				git(t, e.local, "commit", "-q", "-m", "initial")
			} else {
				write(t, e.local, "a", "1\n")
				opts = append(opts, workspace.WithStateDir(filepath.Join(filepath.Dir(mnt), "state")))
			}
			r, err := workspace.Prepare(ctx(t), e.spec, opts...)
			require.NoError(t, err)
			want := agentWork(t, e, kind, 1<<20)
			var refs string
			if kind == "git" {
				refs = git(t, e.local, "for-each-ref")
			}
			filler := fill(t, mnt, 256<<10)

			_, err = r.Restore(ctx(t))
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.Contains(t, err.Error(), "committed.bin")
			assert.Contains(t, err.Error(), "run Restore again")
			assert.NotErrorIs(t, err, workspace.ErrHostile)
			if kind == "git" {
				assert.Equal(t, refs, git(t, e.local, "for-each-ref"), "a ref moved although the work tree is not complete")
			} else {
				assert.Equal(t, "1\n", read(t, e.local, "a"), "a failed plain restore wrote a")
			}

			// Space freed, from a new process: everything arrives.
			require.NoError(t, os.Remove(filler))
			r, err = workspace.Reopen(ctx(t), e.spec, r.ID(), opts...)
			require.NoError(t, err)
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assertArrived(t, e, want)
			if kind == "git" {
				assert.Equal(t, []string{"committed.bin", "dirty.bin"}, res.Updated, "a arrived in the first attempt")
			} else {
				// A plain restore that fails changes nothing.
				assert.Equal(t, []string{"a", "committed.bin", "dirty.bin"}, res.Updated, "the first attempt wrote a")
			}
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Refused)
			if kind == "git" {
				assert.Equal(t, 1, res.Commits)
				assert.Equal(t, git(t, e.remote, "rev-parse", "HEAD"), git(t, e.local, "rev-parse", "HEAD"))
				git(t, e.local, "fsck", "--strict")
				assert.Equal(t, " M a\n?? dirty.bin\n", git(t, e.local, "status", "--porcelain"))
			}
		})
	}
}

// TestRestoreFullDiskEverywhere: the work tree, the repository and the
// state directory share a tmpfs, filled to leave a little more room at
// each step, so that every write of a restore (the bundle, the pack, the
// files, the refs) is the one that fails at some step. Each failure is a
// full disk, not a hostile sandbox; HEAD has not moved; and once space is
// freed a second Restore completes, with git fsck --strict clean.
func TestRestoreFullDiskEverywhere(t *testing.T) {
	for _, leave := range []int64{0, 256 << 10, 900 << 10, 1500 << 10, 1800 << 10, 4 << 20} {
		t.Run(fmt.Sprintf("free-%dKiB", leave>>10), func(t *testing.T) {
			e := newEnv(t, localRunner)
			mnt := localOnTmpfs(t, e, "8m")
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			want := agentWork(t, e, "git", 300<<10)
			head := git(t, e.local, "rev-parse", "HEAD")
			filler := fill(t, mnt, leave)

			_, err = r.Restore(ctx(t))
			t.Logf("restore with %d KiB free: %v", leave>>10, err)
			if err != nil {
				assert.True(t, isNoSpace(err), "not a full disk: %v", err)
				assert.NotErrorIs(t, err, workspace.ErrHostile)
				assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"), "HEAD moved although the restore failed")
			}
			require.NoError(t, os.Remove(filler))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assertArrived(t, e, want)
			assert.Equal(t, git(t, e.remote, "rev-parse", "HEAD"), git(t, e.local, "rev-parse", "HEAD"))
			assert.Empty(t, res.Kept)
			git(t, e.local, "fsck", "--strict")
		})
	}
}

// TestPrepareFullStateDir: a state directory on a full tmpfs fails Prepare
// with ENOSPC and the path, leaves no round behind, and once space is
// freed Prepare succeeds.
func TestPrepareFullStateDir(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			mnt := filepath.Join(filepath.Dir(e.local), "mnt")
			mountTmpfs(t, mnt, "1m")
			state := filepath.Join(mnt, "state")
			require.NoError(t, os.MkdirAll(state, 0o700))
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": randomBytes(t, 64<<10)})
			} else {
				for i := range 200 {
					write(t, e.local, fmt.Sprintf("d/f%d", i), "a file with a name\n")
				}
			}
			filler := fill(t, mnt, 0)
			_, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.Contains(t, err.Error(), state)
			left, err := os.ReadDir(state)
			require.NoError(t, err)
			assert.Empty(t, left, "a failed Prepare left state behind")

			require.NoError(t, os.Remove(filler))
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(state))
			require.NoError(t, err)
			_, err = workspace.Reopen(ctx(t), e.spec, r.ID(), workspace.WithStateDir(state))
			require.NoError(t, err)
		})
	}
}

// TestRestoreReadOnlyDirectory: a work-tree directory that cannot be
// written (read-only: a read-only bind mount when root, mode 0555
// otherwise) fails Restore with the path and the cause; HEAD stays; made
// writable, a second Restore brings everything.
func TestRestoreReadOnlyDirectory(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, localRunner)
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n", "ro/old.txt": "old\n"})
			} else {
				write(t, e.local, "a", "1\n")
				write(t, e.local, "ro/old.txt", "old\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			want := map[string]string{"a": "agent edit\n", "ro/new.txt": "new\n", "ro/old.txt": "changed\n"}
			for p, c := range want {
				write(t, e.remote, p, c)
			}
			if kind == "git" {
				git(t, e.remote, "add", "-A")
				git(t, e.remote, "commit", "-q", "-m", "agent commit")
			}
			head := ""
			if kind == "git" {
				head = git(t, e.local, "rev-parse", "HEAD")
			}
			ro := filepath.Join(e.local, "ro")
			writable := readOnly(t, ro)

			_, err = r.Restore(ctx(t))
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission), "not the cause: %v", err)
			assert.Contains(t, err.Error(), "ro/new.txt")
			if kind == "git" {
				assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
			}
			writable()
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assertArrived(t, e, want)
			assert.Empty(t, res.Kept)
		})
	}
}

// readOnly makes dir read-only and returns what makes it writable again.
func readOnly(t *testing.T, dir string) func() {
	t.Helper()
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		return func() { require.NoError(t, os.Chmod(dir, 0o755)) }
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("bind-mounting %s failed (%v: %s): as root, a read-only bind mount is what stops a write", dir, err, out)
	}
	mounted := true
	umount := func() {
		if mounted {
			mounted = false
			out, err := exec.Command("umount", dir).CombinedOutput()
			require.NoError(t, err, "umount %s: %s", dir, out)
		}
	}
	t.Cleanup(umount)
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", dir).CombinedOutput(); err != nil {
		t.Skipf("remounting %s read-only failed (%v: %s)", dir, err, out)
	}
	return umount
}

// TestIndexFollowsOnRetry: HEAD moved but the index could not follow (its
// lock was taken): Restore fails saying so, and the next Restore brings
// the index along, leaving what the user staged alone.
func TestIndexFollowsOnRetry(t *testing.T) {
	e := newEnv(t, localRunner)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	lock := filepath.Join(e.local, ".git", "index.lock")
	taken := false
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforeCAS(func(int) {
		if !taken {
			taken = true
			require.NoError(t, os.Mkdir(lock, 0o755))
		}
	}))
	require.NoError(t, err)
	write(t, e.remote, "a", "2\n")
	write(t, e.remote, "b", "new\n")
	git(t, e.remote, "add", "a", "b")
	git(t, e.remote, "commit", "-q", "-m", "agent commit")
	// The agent's index goes back to the round's: it stages nothing, so
	// the local index has to follow HEAD (what it staged would have
	// brought a and b along already).
	git(t, e.remote, "read-tree", "HEAD~1")
	write(t, e.local, "c", "staged by the user\n")
	git(t, e.local, "add", "c")

	_, err = r.Restore(ctx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the index could not follow")
	assert.Contains(t, err.Error(), "run Restore again")
	assert.Equal(t, git(t, e.remote, "rev-parse", "HEAD"), git(t, e.local, "rev-parse", "HEAD"))

	require.NoError(t, os.Remove(lock))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Zero(t, res.Commits, "HEAD was already there")
	assert.Equal(t, "A  c\n", git(t, e.local, "status", "--porcelain"))
	left, err := filepath.Glob(filepath.Join(e.local, ".git", "airlock", "rounds", r.ID()+".index-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

// TestRestoreFullDiskAtCAS: the disk fills up after the work tree is
// written, just before HEAD moves: Restore fails naming the ref's lock
// and saying HEAD has not moved, and the next Restore installs the
// commits.
func TestRestoreFullDiskAtCAS(t *testing.T) {
	e := newEnv(t, localRunner)
	mnt := localOnTmpfs(t, e, "4m")
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	filler := ""
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforeCAS(func(int) {
		if filler == "" {
			filler = fill(t, mnt, 0)
		}
	}))
	require.NoError(t, err)
	want := agentWork(t, e, "git", 64<<10)
	head := git(t, e.local, "rev-parse", "HEAD")

	_, err = r.Restore(ctx(t))
	require.Error(t, err)
	// git says only that it "couldn't write" the ref's lock file here.
	assert.Contains(t, err.Error(), "refs/heads/main.lock")
	assert.Contains(t, err.Error(), "it has not moved")
	assert.NotErrorIs(t, err, workspace.ErrHostile)
	assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
	assertArrived(t, e, want)

	require.NoError(t, os.Remove(filler))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, git(t, e.remote, "rev-parse", "HEAD"), git(t, e.local, "rev-parse", "HEAD"))
	assert.Equal(t, " M a\n?? dirty.bin\n", git(t, e.local, "status", "--porcelain"))
	git(t, e.local, "fsck", "--strict")
}

// leftoversIn lists the temporary names below dir: git's (tmp_pack_*,
// tmp_idx_*, tmp_obj_*, *.lock) and airlock's (quarantines, temporary
// indexes and bundles).
func leftoversIn(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := de.Name()
		switch {
		case strings.HasPrefix(n, "tmp_"), strings.HasSuffix(n, ".lock") && !strings.HasSuffix(p, filepath.Join("airlock", n)),
			strings.HasPrefix(n, "airlock-quarantine-"), strings.HasPrefix(n, "tmp-"), strings.HasSuffix(n, ".bundle"), strings.Contains(n, ".airlock-"):
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// mountObjects puts the object directory of the repository at local on a
// tmpfs of size, keeping its objects.
func mountObjects(t *testing.T, local, size string) string {
	t.Helper()
	objects := filepath.Join(local, ".git", "objects")
	keep := filepath.Join(t.TempDir(), "objects")
	out, err := exec.Command("cp", "-a", objects, keep).CombinedOutput()
	require.NoError(t, err, "%s", out)
	mountTmpfs(t, objects, size)
	out, err = exec.Command("cp", "-a", keep+"/.", objects).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return objects
}

// TestRestoreFullObjectDir: the repository's object directory is full
// while the sandbox's pack is stored in the quarantine (git says "write
// error. Out of diskspace", or names no cause at all): Restore fails with
// an error wrapping ENOSPC that names the object directory and says to
// run Restore again, never ErrHostile; nothing moved and nothing is left
// (no quarantine, no tmp_pack_*); with space again, Restore completes.
func TestRestoreFullObjectDir(t *testing.T) {
	for _, leave := range []int64{0, 4 << 10, 16 << 10, 64 << 10, 160 << 10} {
		t.Run(fmt.Sprintf("free-%dKiB", leave>>10), func(t *testing.T) {
			e := newEnv(t, localRunner)
			initRepo(t, e.local, map[string]string{"a": "1\n"})
			objects := mountObjects(t, e.local, "1m")
			r, err := workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			want := agentWork(t, e, "git", 200<<10)
			head := git(t, e.local, "rev-parse", "HEAD")
			status := git(t, e.local, "status", "--porcelain")
			filler := fill(t, objects, leave)

			_, err = r.Restore(ctx(t))
			require.Error(t, err, "a pack of 200 KiB stored with %d KiB free", leave>>10)
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.NotErrorIs(t, err, workspace.ErrHostile, "a full host disk is no hostile sandbox")
			assert.NotErrorIs(t, err, sandbox.ErrProtocol, "a full host disk is no hostile sandbox")
			assert.Contains(t, err.Error(), objects)
			assert.Contains(t, err.Error(), "run Restore again")
			assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
			assert.Equal(t, status, git(t, e.local, "status", "--porcelain"), "nothing of the work tree changed")
			assert.Empty(t, leftoversIn(t, filepath.Join(e.local, ".git")), "temporary files left in the repository")

			require.NoError(t, os.Remove(filler))
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assertArrived(t, e, want)
			assert.Equal(t, 1, res.Commits)
			assert.Equal(t, git(t, e.remote, "rev-parse", "HEAD"), git(t, e.local, "rev-parse", "HEAD"))
			assert.Empty(t, leftoversIn(t, filepath.Join(e.local, ".git")))
			git(t, e.local, "fsck", "--strict")
		})
	}
}

// TestPrepareFullRepository: the repository (objects, the temporary index
// of the snapshot) is on a tmpfs filled to leave 0, 1, 2, ... pages:
// every Prepare that fails wraps ENOSPC (git's "Out of diskspace" and
// "No space left on device" alike), names the repository, leaves the
// user's work tree, index and refs as they were and nothing temporary
// behind, and succeeds once space is freed.
func TestPrepareFullRepository(t *testing.T) {
	e := newEnv(t, localRunner)
	mnt := filepath.Join(filepath.Dir(e.local), "mnt")
	mountTmpfs(t, mnt, "2m")
	gitDir := filepath.Join(mnt, "gitdir")
	git(t, e.local, "init", "-q", "-b", "main", "--separate-git-dir", gitDir)
	write(t, e.local, "a", "1\n")
	git(t, e.local, "add", "a")
	git(t, e.local, "commit", "-q", "-m", "initial")
	failed, clean := 0, 0
	for k := int64(0); clean < 2 && k <= 96<<10; k += 4 << 10 {
		write(t, e.local, fmt.Sprintf("dirty-%d.bin", k), randomBytes(t, 24<<10))
		status := git(t, e.local, "status", "--porcelain=v2", "--branch")
		filler := fill(t, mnt, k)
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, os.Remove(filler))
		if err == nil {
			clean++
			_, err = r.Restore(ctx(t))
			require.NoError(t, err)
			continue
		}
		clean = 0
		failed++
		assert.ErrorIs(t, err, syscall.ENOSPC, "Prepare with %d KiB free", k>>10)
		assert.Contains(t, err.Error(), gitDir)
		assert.Contains(t, err.Error(), "run Prepare again")
		assert.Equal(t, status, git(t, e.local, "status", "--porcelain=v2", "--branch"), "Prepare with %d KiB free changed git status", k>>10)
		assert.Empty(t, leftoversIn(t, gitDir), "Prepare with %d KiB free left temporary files", k>>10)
		_, err = workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err, "the Prepare retried with space again (%d KiB were free)", k>>10)
	}
	require.Equal(t, 2, clean, "Prepare still met the full disk at the sweep's end")
	assert.NotZero(t, failed, "no level met the full disk: the sweep tests nothing")
	git(t, e.local, "fsck", "--strict")
}
