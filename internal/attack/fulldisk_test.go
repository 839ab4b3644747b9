package attack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// Full disks: a small tmpfs holds the host work tree, the state directory
// and the deliverable store; a filler file leaves k bytes free, k swept
// page by page over every write of Restore, Prepare and Register. At every
// level the operation either succeeds with everything arrived, or fails
// with an error wrapping ENOSPC that names a path on the full file system,
// with nothing half-written and nothing lost; a retry after the filler is
// deleted completes. The sandbox lives off the tmpfs: it never fills.
// AIRLOCK_FULLDISK=full sweeps a larger change.

// tmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted on
// cleanup. It skips t when not root or when the mount fails.
func tmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the full-disk tests mount a tmpfs and need root (CI runs them as root); skipped: not root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("the full-disk tests need mount -t tmpfs, which failed here (%v: %s); skipped", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// filler fills the file system of mnt until free bytes are left (page
// granular), with the file mnt/filler; free returns it.
type filler struct {
	t   *testing.T
	mnt string
}

func (f filler) path() string { return filepath.Join(f.mnt, "filler") }

func (f filler) avail() int64 {
	var st syscall.Statfs_t
	require.NoError(f.t, syscall.Statfs(f.mnt, &st))
	return int64(st.Bavail) * int64(st.Bsize)
}

func (f filler) fill(free int64) {
	f.t.Helper()
	f.free()
	size := f.avail() - free
	if size <= 0 {
		return
	}
	fh, err := os.OpenFile(f.path(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(f.t, err)
	require.NoError(f.t, allocate(fh, size), "allocating %d bytes for the filler", size)
	require.NoError(f.t, fh.Close())
}

func (f filler) free() {
	f.t.Helper()
	if err := os.Remove(f.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		require.NoError(f.t, err)
	}
}

const page = 4096

// sweepLevels runs level with k = 0, page, 2*page, ... bytes free, until
// level has succeeded at two levels in a row without meeting the full disk
// (every higher level would too) or k passes limit.
func sweepLevels(t *testing.T, fl filler, limit int64, level func(t *testing.T, k int64) (hitFull bool)) {
	clean := 0
	failures := 0
	for k := int64(0); k <= limit && clean < 2; k += page {
		hit := level(t, k)
		if hit {
			clean = 0
			failures++
		} else {
			clean++
		}
		fl.free()
		if t.Failed() {
			t.Logf("the first failure is at %d bytes free", k)
			return
		}
	}
	require.Equal(t, 2, clean, "the operation still met the full disk with %d bytes free: raise the sweep's limit", limit)
	t.Logf("%d levels met the full disk; every one failed cleanly and its retry completed", failures)
}

// checkNoSpace fails t unless err wraps ENOSPC and names a path on mnt.
func checkNoSpace(t *testing.T, err error, mnt, what string) {
	t.Helper()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%s on a full disk: %v; want an error wrapping syscall.ENOSPC", what, err)
	}
	if !strings.Contains(err.Error(), mnt) {
		t.Errorf("%s on a full disk: %v; want the error to name the path on %s that could not be written", what, err, mnt)
	}
}

// fullWork is a workspace of kind whose host side (work tree and state)
// lies on a tmpfs and whose sandbox does not.
func fullWork(t *testing.T, kind string) (workspace.Spec, []workspace.Option, filler) {
	mnt := tmpfs(t, 6<<20)
	sb := t.TempDir()
	spec := workspace.Spec{Local: filepath.Join(mnt, "local"), Remote: filepath.Join(sb, "work"), Runner: sandbox.Local(sb)}
	fs := map[string]string{"README": "readme\n", "keep/a.txt": "a\n", "keep/b.txt": strings.Repeat("b", 5000)}
	var opts []workspace.Option
	if kind == "git" {
		newRepo(t, spec.Local, fs)
	} else {
		require.NoError(t, os.MkdirAll(spec.Local, 0o755))
		writeFiles(t, spec.Local, fs)
		opts = append(opts, workspace.WithStateDir(filepath.Join(mnt, "state")))
	}
	return spec, opts, filler{t: t, mnt: mnt}
}

// agentChange makes round n's change in the sandbox: new files (a few
// pages), an edit, a deletion, committed for git, and an untracked file.
func agentChange(t *testing.T, spec workspace.Spec, kind string, n int) {
	files := 3
	if os.Getenv("AIRLOCK_FULLDISK") == "full" {
		files = 12
	}
	change := map[string]string{"README": fmt.Sprintf("agent %d\n", n)}
	for j := range files {
		change[fmt.Sprintf("agent/%03d/f%d.bin", n, j)] = strings.Repeat(fmt.Sprintf("%d.%d|", n, j), 900+300*j)
	}
	writeFiles(t, spec.Remote, change)
	if n > 0 {
		require.NoError(t, os.RemoveAll(filepath.Join(spec.Remote, "agent", fmt.Sprintf("%03d", n-1), "f0.bin")))
	}
	if kind == "git" {
		gitIn(t, spec.Remote, "add", "-A") // .airlock is ignored (info/exclude)
		gitIn(t, spec.Remote, "commit", "-q", "-m", fmt.Sprintf("agent %d", n))
	}
	writeFiles(t, spec.Remote, map[string]string{fmt.Sprintf("agent/%03d/untracked.txt", n): strings.Repeat("u", 4500)})
}

func TestFullDiskRestore(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			spec, opts, fl := fullWork(t, kind)
			n := 0
			sweepLevels(t, fl, 400*page, func(t *testing.T, k int64) bool {
				n++
				r, err := workspace.Prepare(context.Background(), spec, opts...)
				require.NoError(t, err, "preparing round %d (the disk is not full yet)", n)
				agentChange(t, spec, kind, n)
				before := files(t, spec.Local, ".git")
				remoteFiles := files(t, spec.Remote, ".git", sandbox.RuntimeDir)
				var head string
				if kind == "git" {
					head = gitIn(t, spec.Local, "rev-parse", "HEAD")
				}

				fl.fill(k)
				_, rerr := r.Restore(context.Background())
				fl.free()
				if rerr == nil {
					checkSpec(t, spec, kind, filepath.Join(fl.mnt, "state"), fmt.Sprintf("a Restore that succeeded with %d bytes free", k))
					return false
				}
				what := fmt.Sprintf("Restore with %d bytes free", k)
				checkNoSpace(t, rerr, fl.mnt, what)
				// Nothing half-written: every file is the old one or the
				// sandbox's; no temporary file is left.
				for p, data := range withoutLeftovers(files(t, spec.Local, ".git")) {
					if old, ok := before[p]; ok && old == data {
						continue
					}
					if data != remoteFiles[p] {
						t.Errorf("%s: %s holds %d bytes that are neither the local file nor the sandbox's: half-written", what, p, len(data))
					}
				}
				assert.Empty(t, leftovers(t, fl.mnt), "%s: temporary files left on the full disk", what)
				// Nothing lost: the sandbox still has everything.
				require.Empty(t, treeDiff(remoteFiles, files(t, spec.Remote, ".git", sandbox.RuntimeDir)), "%s: the sandbox's files changed", what)
				if kind == "git" {
					checkRepo(t, spec.Local)
					if now := gitIn(t, spec.Local, "rev-parse", "HEAD"); now != head {
						if d := treeDiff(remoteFiles, withoutLeftovers(files(t, spec.Local, ".git", sandbox.RuntimeDir))); d != "" {
							t.Errorf("%s: HEAD moved to the agent's commit although the work tree is incomplete:\n%s", what, d)
						}
					}
				}
				// The retry, with space again, completes.
				r2, err := workspace.Reopen(context.Background(), spec, r.ID(), opts...)
				require.NoError(t, err, "reopening round %s after the full disk", r.ID())
				_, err = r2.Restore(context.Background())
				require.NoError(t, err, "the Restore retried after freeing space (%s)", what)
				checkSpec(t, spec, kind, filepath.Join(fl.mnt, "state"), "the retried Restore")
				return true
			})
		})
	}
}

func TestFullDiskPrepare(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			spec, opts, fl := fullWork(t, kind)
			n := 0
			sweepLevels(t, fl, 200*page, func(t *testing.T, k int64) bool {
				n++
				// A local change to ship: a commit (git) and dirty files.
				change := map[string]string{"README": fmt.Sprintf("local %d\n", n), fmt.Sprintf("local/%03d.txt", n): strings.Repeat("l", 6000)}
				writeFiles(t, spec.Local, change)
				if kind == "git" {
					gitIn(t, spec.Local, "add", "-A")
					gitIn(t, spec.Local, "commit", "-q", "-m", fmt.Sprintf("local %d", n))
				}
				writeFiles(t, spec.Local, map[string]string{fmt.Sprintf("dirty/%03d.txt", n): strings.Repeat("d", 5000)})
				var status string
				if kind == "git" {
					status = gitIn(t, spec.Local, "status", "--porcelain=v2", "--branch")
				}
				before := files(t, spec.Local)

				fl.fill(k)
				r, perr := workspace.Prepare(context.Background(), spec, opts...)
				fl.free()
				what := fmt.Sprintf("Prepare with %d bytes free", k)
				if perr == nil {
					require.Empty(t, treeDiff(files(t, spec.Local, ".git", sandbox.RuntimeDir), files(t, spec.Remote, ".git", sandbox.RuntimeDir)), "%s succeeded: the sandbox must hold the local files", what)
					_, err := r.Restore(context.Background())
					require.NoError(t, err, "restoring the round of %s", what)
					checkSpec(t, spec, kind, filepath.Join(fl.mnt, "state"), what+", then restored")
					return false
				}
				checkNoSpace(t, perr, fl.mnt, what)
				// Nothing of the user's changed, nothing half-written.
				after := files(t, spec.Local)
				for p, data := range before {
					if strings.HasPrefix(p, ".git/") {
						continue
					}
					require.Equal(t, data, after[p], "%s: the local file %s changed", what, p)
				}
				if kind == "git" {
					require.Equal(t, status, gitIn(t, spec.Local, "status", "--porcelain=v2", "--branch"), "%s: git status changed", what)
					checkRepo(t, spec.Local)
				}
				assert.Empty(t, leftovers(t, fl.mnt), "%s: temporary files left on the full disk", what)
				// The retry, with space again, completes.
				r, err := workspace.Prepare(context.Background(), spec, opts...)
				require.NoError(t, err, "the Prepare retried after freeing space (%s)", what)
				require.Empty(t, treeDiff(files(t, spec.Local, ".git", sandbox.RuntimeDir), files(t, spec.Remote, ".git", sandbox.RuntimeDir)), "the retried Prepare: the sandbox must hold the local files")
				_, err = r.Restore(context.Background())
				require.NoError(t, err, "restoring the retried Prepare's round")
				checkSpec(t, spec, kind, filepath.Join(fl.mnt, "state"), "the retried Prepare, then restored")
				return true
			})
		})
	}
}

func TestFullDiskRegister(t *testing.T) {
	mnt := tmpfs(t, 4<<20)
	fl := filler{t: t, mnt: mnt}
	storeDir := filepath.Join(mnt, "store")
	store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: store}
	sb := t.TempDir()
	ws := deliverable.RemoteWorkspace(sandbox.Local(sb), sb)
	size := 40 << 10
	if os.Getenv("AIRLOCK_FULLDISK") == "full" {
		size = 400 << 10
	}
	n := 0
	sweepLevels(t, fl, int64(size)*3+64*page, func(t *testing.T, k int64) bool {
		n++
		data := strings.Repeat(fmt.Sprintf("deliverable %d|", n), size/16)
		name := fmt.Sprintf("report-%03d.txt", n)
		writeFiles(t, sb, map[string]string{"out/" + name: data})
		sum := sha256.Sum256([]byte(data))
		req := deliverable.Request{ContentRef: "out/" + name, Filename: name, ContentType: "text/plain", ByteSize: int64(len(data)),
			SHA256: hex.EncodeToString(sum[:]), Title: "report", IdempotencyKey: fmt.Sprintf("key-%d", n)}

		fl.fill(k)
		rc, rerr := reg.Register(context.Background(), ws, "task-1", "run-1", req)
		fl.free()
		what := fmt.Sprintf("Register with %d bytes free", k)
		if rerr != nil {
			var he *deliverable.HostError
			require.ErrorAs(t, rerr, &he, "%s: a full store is the host's failure, not the agent's", what)
			checkNoSpace(t, rerr, mnt, what)
			checkStore(t, storeDir, what)
			require.Equal(t, data, readFile(t, filepath.Join(sb, "out", name)), "%s: the sandbox's file", what)
			rc, err = reg.Register(context.Background(), ws, "task-1", "run-1", req)
			require.NoError(t, err, "the Register retried after freeing space (%s)", what)
		}
		_, body, err := store.Open(context.Background(), rc.AttachmentID)
		require.NoError(t, err)
		got, err := io.ReadAll(body)
		require.NoError(t, err)
		require.NoError(t, body.Close())
		require.Equal(t, data, string(got), "%s: the stored bytes", what)
		checkStore(t, storeDir, what+", then retried")
		return rerr != nil
	})
}

// checkStore fails t unless the FileStore at dir holds nothing partial:
// tmp/ is empty, every blob's SHA-256 is its name, every record decodes,
// and the lock files of locks/ are empty.
func checkStore(t *testing.T, dir, what string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch filepath.Dir(rel) {
		case "tmp":
			t.Errorf("%s: the store keeps a temporary file %s", what, rel)
		case "locks":
			if len(b) != 0 {
				t.Errorf("%s: the lock file %s holds data", what, rel)
			}
		case "blobs":
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != filepath.Base(rel) {
				t.Errorf("%s: the blob %s does not hash to its name: partial", what, rel)
			}
		default:
			if !json.Valid(b) {
				t.Errorf("%s: the record %s is not whole JSON: partial", what, rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
