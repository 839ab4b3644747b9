package workspace_test

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestLongNamesArrive: a file whose name is NAME_MAX (255) bytes long, in
// the top directory and below a directory whose name is 255 bytes long,
// arrives like any other, over both kinds (the temporary name a write goes
// through does not grow with the target's).
func TestLongNamesArrive(t *testing.T) {
	long := strings.Repeat("n", 255)
	deep := "dir-" + strings.Repeat("m", 251) + "/" + strings.Repeat("o", 255)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, kind)
			write(t, e.remote, long, "255 bytes\n")
			write(t, e.remote, deep, "two long components\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Refused)
			assert.Equal(t, []string{deep, long}, res.Updated)
			assert.Equal(t, "255 bytes\n", read(t, e.local, long))
			assert.Equal(t, "two long components\n", read(t, e.local, deep))
			assert.Empty(t, tmpFiles(t, e.local), "temporary files left")
		})
	}
}

// TestNamesHostRefuses: entries whose names the host's file system does
// not accept (a component of 256 or more bytes, which a sandbox on another
// file system can hold) are listed in Refused with the reason, and the
// rest of the restore goes on, over both kinds; a plain sandbox's name
// with a backslash is refused under the path as the sandbox wrote it.
func TestNamesHostRefuses(t *testing.T) {
	tooLong := strings.Repeat("x", 300)
	inDir := strings.Repeat("d", 300) + "/f"
	t.Run("plain", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		fr := &fakeRunner{real: e.spec.Runner}
		e.spec.Runner = fr
		write(t, e.local, "a", "1\n")
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		file := func(name, data string) {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}))
			_, err := tw.Write([]byte(data))
			require.NoError(t, err)
		}
		file("./a", "1\n")
		file("./"+tooLong, "long\n")
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./" + strings.Repeat("d", 300) + "/", Typeflag: tar.TypeDir, Mode: 0o755}))
		file("./"+inDir, "below a long name\n")
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./link-" + tooLong, Typeflag: tar.TypeSymlink, Linkname: "a"}))
		file("./back\\slash", "backslash\n")
		file("./ok", "ok\n")
		require.NoError(t, tw.Close())
		fr.inject = func(cmd sandbox.Command) (bool, error) {
			if !strings.Contains(cmd.Script, "airlock-restore") {
				return false, nil
			}
			_, err := cmd.Stdout.Write(restoreStream("", "tar", buf.Bytes()))
			return true, err
		}
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, "a name the host cannot hold is refused, not a failed restore")
		assert.Equal(t, []string{"back\\slash", strings.Repeat("d", 300), inDir, "link-" + tooLong, tooLong}, res.Refused)
		for _, p := range []string{tooLong, "link-" + tooLong, strings.Repeat("d", 300)} {
			assert.Contains(t, res.Reasons[p], "the host's file system does not accept the name", p)
			assert.Contains(t, res.Reasons[p], "file name too long", p)
		}
		assert.Contains(t, res.Reasons["back\\slash"], "backslash")
		assert.Equal(t, []string{"ok"}, res.Updated)
		assert.Equal(t, "ok\n", read(t, e.local, "ok"))
		assert.Empty(t, tmpFiles(t, e.local), "temporary files left")
	})
	t.Run("git", func(t *testing.T) {
		e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
		fr := &fakeRunner{real: e.spec.Runner}
		e.spec.Runner = fr
		initRepo(t, e.local, map[string]string{"a": "1\n"})
		r, err := workspace.Prepare(ctx(t), e.spec)
		require.NoError(t, err)
		c := newCrafter(t, e.local, "refs/airlock/out/"+r.ID()+"/snap")
		dir := c.tree(entry{"100644", "f", c.x})
		lnk := strings.TrimSpace(gitIn(t, c.dir, "a", "hash-object", "-w", "--stdin"))
		snap := c.commit(c.tree(entry{"100644", "a", c.one}, entry{"40000", strings.Repeat("d", 300), dir},
			entry{"120000", "link-" + tooLong, lnk}, entry{"100644", "ok", c.x}, entry{"100644", tooLong, c.x}), c.head)
		payload := c.bundle(snap, c.head)
		fr.inject = func(cmd sandbox.Command) (bool, error) {
			if !strings.Contains(cmd.Script, "airlock-restore") {
				return false, nil
			}
			_, err := cmd.Stdout.Write(restoreStream("", "bundle "+c.head+" "+snap, asRun(t, cmd.Script, c.out, payload)))
			return true, err
		}
		res, err := r.Restore(ctx(t))
		require.NoError(t, err, "a name the host cannot hold is refused, not a failed restore")
		assert.Equal(t, []string{inDir, "link-" + tooLong, tooLong}, res.Refused)
		for _, p := range []string{inDir, "link-" + tooLong, tooLong} {
			assert.Contains(t, res.Reasons[p], "the host's file system does not accept the name", p)
		}
		assert.Equal(t, []string{"ok"}, res.Updated)
		assert.Equal(t, "x\n", read(t, e.local, "ok"))
		assert.Empty(t, tmpFiles(t, e.local), "temporary files left")
		assert.Equal(t, c.head+"\n", git(t, e.local, "rev-parse", "HEAD"))
	})
}

// TestBackslashRefusedAsWritten: a plain sandbox's file named back\slash
// is refused under that name (not as the ./back\slash of its tar stream).
func TestBackslashRefusedAsWritten(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "plain")
	write(t, e.remote, "back\\slash", "backslash\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"back\\slash"}, res.Refused)
	assert.False(t, exists(e.local, "back\\slash"))
}

// tmpFiles lists the temporary files of airlock's in the tree dir.
func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".airlock-tmp-") || strings.Contains(d.Name(), ".airlock-") && d.Name() != ".airlock" {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// journals lists the journals of temporary files in dir.
func journals(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".journal") {
			out = append(out, e.Name())
		}
	}
	return out
}

// journalDir is where restores of a work tree of kind journal their
// temporary files.
func journalDir(local, kind string) string {
	if kind == "git" {
		return filepath.Join(local, ".git", "airlock")
	}
	return filepath.Join(local, sandbox.RuntimeDir)
}

// TestTmpLeftoversSwept plants the temporary files (and journals) that
// killed restores leave, owned by a dead process, a zombie, a reused pid
// and a live process, in the top directory, a subdirectory and the
// runtime directory: the next Restore, and the next Prepare, remove all but
// the live owner's, which Prepare never ships to the sandbox; the host's
// git never snapshots one.
func TestTmpLeftoversSwept(t *testing.T) {
	requireProc(t)
	dead, zombie, live, reused := owners(t)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, kind)
			jd := journalDir(e.local, kind)
			var liveTmp []string
			plants := 0
			plant := func() {
				plants++
				for _, o := range []string{dead, zombie, live, reused} {
					for _, d := range []string{".", "sub/dir", sandbox.RuntimeDir} {
						p := filepath.ToSlash(filepath.Join(d, workspace.TmpNameOf(o)))
						write(t, e.local, p, "half a file\n")
						if o == live {
							liveTmp = append(liveTmp, p)
						}
					}
					require.NoError(t, workspace.WriteJournal(jd, o, ".", "sub/dir", sandbox.RuntimeDir))
				}
				slices.Sort(liveTmp)
			}
			check := func(what string) {
				t.Helper()
				assert.Equal(t, liveTmp, tmpFiles(t, e.local), "%s: only the live owner's temporary files stay", what)
				js := journals(t, jd)
				require.Len(t, js, plants, "%s: only the live owner's journals stay: %v", what, js)
				for _, j := range js {
					assert.True(t, strings.HasPrefix(j, "writes-"+live+"-"), "%s: %v", what, js)
				}
			}
			plant()
			write(t, e.remote, "a", "2\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			assert.Empty(t, res.Refused)
			check("after the Restore")
			assert.Equal(t, "2\n", read(t, e.local, "a"))

			plant()
			r, err = workspace.Prepare(ctx(t), e.spec)
			require.NoError(t, err)
			check("after the Prepare")
			assert.Empty(t, tmpFiles(t, e.remote), "Prepare shipped a temporary file to the sandbox")
			if kind == "git" {
				assert.NotContains(t, git(t, e.remote, "ls-files", "-c", "-o"), ".airlock-tmp-")
			}
			res, err = r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Empty(t, res.Deleted, "a temporary file was taken for the user's and deleted")
			assert.Empty(t, res.Refused)
			check("after restoring the round")
		})
	}
}

// TestSandboxTmpNameRefused: a sandbox entry named like a temporary file
// of airlock's is refused (a sweep could take it for a leftover), over
// both kinds.
func TestSandboxTmpNameRefused(t *testing.T) {
	requireProc(t)
	dead, _, _, _ := owners(t)
	name := workspace.TmpNameOf(dead)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			r := prepareOneFile(t, e, kind)
			write(t, e.remote, name, "agent\n")
			write(t, e.remote, "d/"+name, "agent\n")
			write(t, e.remote, "ok", "ok\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{name, "d/" + name}, res.Refused)
			assert.Contains(t, res.Reasons[name], "temporary files")
			assert.Equal(t, []string{"ok"}, res.Updated)
			assert.Empty(t, tmpFiles(t, e.local))
		})
	}
}

// TestKilledRestoreTmp SIGKILLs a host in the middle of a Restore, with a
// temporary file written and not yet renamed into place, over both kinds.
// While the killed host's process is a zombie (not reaped), the next
// Restore removes the temporary file and its journal and brings
// everything; a host blocked at the same point and alive keeps its
// temporary file through a Prepare, which does not ship it.
func TestKilledRestoreTmp(t *testing.T) {
	if os.Getenv("WORKSPACE_TMP_MODE") != "" {
		t.Skip("child process")
	}
	requireProc(t)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			state := t.TempDir()
			opts := []workspace.Option{workspace.WithStateDir(state)}
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			} else {
				write(t, e.local, "a", "1\n")
			}
			r, err := workspace.Prepare(ctx(t), e.spec, opts...)
			require.NoError(t, err)
			write(t, e.remote, "sub/dir/new", "agent\n")
			write(t, e.remote, "a", "2\n")
			if kind == "git" {
				git(t, e.remote, "add", "-A")
				git(t, e.remote, "commit", "-q", "-m", "agent")
			}
			cmd, mark := startToMark(t, "TestKilledRestoreTmpChild", "WORKSPACE_TMP_MARK", "WORKSPACE_TMP_MODE="+kind, "WORKSPACE_TMP_ID="+r.ID(),
				"WORKSPACE_TMP_LOCAL="+e.local, "WORKSPACE_TMP_REMOTE="+e.remote, "WORKSPACE_TMP_STATE="+state)
			deadline := time.Now().Add(2 * time.Minute)
			b, err := os.ReadFile(mark)
			require.NoError(t, err)
			tmp := string(b)
			require.FileExists(t, filepath.Join(e.local, tmp))
			require.Len(t, journals(t, journalDir(e.local, kind)), 1)

			// The owner runs: its temporary file stays through a Prepare
			// of the same work tree, which does not ship it.
			other := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			spec := e.spec
			spec.Remote, spec.Runner = other.remote, other.spec.Runner
			_, err = workspace.Prepare(ctx(t), spec, workspace.WithStateDir(t.TempDir()))
			require.NoError(t, err)
			assert.FileExists(t, filepath.Join(e.local, tmp), "a live owner's temporary file was removed")
			assert.Len(t, journals(t, journalDir(e.local, kind)), 1, "a live owner's journal was removed")
			assert.Empty(t, tmpFiles(t, other.remote), "Prepare shipped a temporary file to the sandbox")

			// Killed, and a zombie: the next Restore sweeps.
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			for procState(cmd.Process.Pid) != "Z" {
				require.True(t, time.Now().Before(deadline), "the child did not die")
				time.Sleep(5 * time.Millisecond)
			}
			r2, err := workspace.Reopen(ctx(t), e.spec, r.ID(), opts...)
			require.NoError(t, err)
			res, err := r2.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"sub/dir/new"}, res.Updated)
			assert.Empty(t, res.Refused)
			assert.Equal(t, "agent\n", read(t, e.local, "sub/dir/new"))
			assert.Equal(t, "2\n", read(t, e.local, "a"))
			assert.Empty(t, tmpFiles(t, e.local), "temporary files of the killed host left")
			assert.Empty(t, journals(t, journalDir(e.local, kind)), "the journal of the killed host left")
			if kind == "git" {
				assert.Equal(t, 1, res.Commits)
				assert.Empty(t, git(t, e.local, "status", "--porcelain"))
			}
		})
	}
}

// TestKilledRestoreTmpChild is the host TestKilledRestoreTmp kills: it
// restores and blocks before renaming the temporary file of sub/dir/new
// into place, after writing its path to the mark.
func TestKilledRestoreTmpChild(t *testing.T) {
	if os.Getenv("WORKSPACE_TMP_MODE") == "" {
		t.Skip("run by TestKilledRestoreTmp")
	}
	remote, mark := os.Getenv("WORKSPACE_TMP_REMOTE"), os.Getenv("WORKSPACE_TMP_MARK")
	spec := workspace.Spec{Local: os.Getenv("WORKSPACE_TMP_LOCAL"), Remote: remote, Runner: sandbox.Local(filepath.Dir(remote))}
	r, err := workspace.Reopen(ctx(t), spec, os.Getenv("WORKSPACE_TMP_ID"), workspace.WithStateDir(os.Getenv("WORKSPACE_TMP_STATE")),
		workspace.WithBeforePlace(func(tmp, rel string) {
			if rel != "sub/dir/new" {
				return
			}
			if err := os.WriteFile(mark+".tmp", []byte(tmp), 0o600); err != nil {
				panic(err)
			}
			if err := os.Rename(mark+".tmp", mark); err != nil {
				panic(err)
			}
			select {} // killed here
		}))
	require.NoError(t, err)
	_, err = r.Restore(ctx(t))
	require.NoError(t, err)
}

// TestRefLocksSwept plants the lock files that a git killed while it
// updated a temporary ref leaves (alone, and beside the ref), owned by a
// dead process, a zombie, a reused pid and a live one: the next Restore
// removes all but the live owner's, and the refs beside them.
func TestRefLocksSwept(t *testing.T) {
	requireProc(t)
	dead, zombie, live, reused := owners(t)
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	id := r.ID()
	refs := filepath.Join(e.local, ".git", "refs", "airlock")
	for _, o := range []string{dead, zombie, live, reused} {
		write(t, refs, "restore/"+o+"/"+id+"-abcdefabcdef.lock", "")
		write(t, refs, "tmp/"+o+"/"+id+"/snap.lock", "")
		if o != live {
			git(t, e.local, "update-ref", "refs/airlock/restore/"+o+"/"+id+"-bbbbbbbbbbbb", "HEAD")
			write(t, refs, "restore/"+o+"/"+id+"-bbbbbbbbbbbb.lock", "")
		}
	}
	write(t, e.remote, "a", "2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	var locks []string
	require.NoError(t, filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(refs, p)
			locks = append(locks, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"restore/" + live + "/" + id + "-abcdefabcdef.lock", "tmp/" + live + "/" + id + "/snap.lock"}, locks)
	assert.Empty(t, git(t, e.local, "for-each-ref", "refs/airlock"))
	git(t, e.local, "fsck", "--strict", "--no-progress")
}

// TestSandboxReportSwept: the report file a plain restore's sandbox shell
// leaves in the sandbox's runtime directory when its host is killed
// (restore-<round>.<pid>) is removed by the next restore once that shell
// is gone (dead, or a zombie), never while it runs.
func TestSandboxReportSwept(t *testing.T) {
	requireProc(t)
	dead, zombie, live, _ := owners(t)
	pid := func(tag string) string { p, _, _ := strings.Cut(tag, "."); return p }
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "plain")
	rd := filepath.Join(e.remote, sandbox.RuntimeDir)
	for _, o := range []string{dead, zombie, live} {
		write(t, rd, "restore-"+r.ID()+"."+pid(o), "a report\n")
	}
	write(t, e.remote, "a", "2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	var left []string
	ents, err := os.ReadDir(rd)
	require.NoError(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "restore-") {
			left = append(left, e.Name())
		}
	}
	assert.Equal(t, []string{"restore-" + r.ID() + "." + pid(live)}, left)
}

// TestSandboxIndexLockSwept: the scratch index, its lock and the lock of
// the bundled ref that a git restore's sandbox shell left when its host
// was killed do not block the next restore of the round.
func TestSandboxIndexLockSwept(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, ".git/airlock-restore-"+r.ID()+".index.lock", "")
	write(t, e.remote, ".git/airlock-restore-"+r.ID()+".index", "half an index")
	write(t, e.remote, ".git/refs/airlock/out/"+r.ID()+"/snap.lock", "")
	write(t, e.remote, "a", "2\n")
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, res.Updated)
	assert.False(t, exists(e.remote, ".git/airlock-restore-"+r.ID()+".index.lock"))
	assert.False(t, exists(e.remote, ".git/airlock-restore-"+r.ID()+".index"))
	assert.False(t, exists(e.remote, ".git/refs/airlock/out/"+r.ID()+"/snap.lock"))
}

// TestStateTmpSwept: the temporary files of state files (a Prepare killed
// while it saved a round) in the state directory, and for a git round the
// lock of its scratch index (its git killed), are removed by the next
// Prepare and Restore when their owner is gone, never while it runs, over
// both kinds.
func TestStateTmpSwept(t *testing.T) {
	requireProc(t)
	dead, zombie, live, reused := owners(t)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			state := t.TempDir()
			if kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			} else {
				write(t, e.local, "a", "1\n")
			}
			opts := []workspace.Option{workspace.WithStateDir(state)}
			liveNames := map[string]bool{}
			plant := func() {
				for _, o := range []string{dead, zombie, live, reused} {
					n := workspace.TmpNameOf(o)
					write(t, state, n, `{"schema":`)
					idx := "tmp-" + o + "-0123456789abcdef01234567.index.lock"
					if kind == "git" {
						write(t, state, idx, "")
					}
					if o == live {
						liveNames[n] = true
						if kind == "git" {
							liveNames[idx] = true
						}
					}
				}
			}
			check := func(what string) {
				t.Helper()
				ents, err := os.ReadDir(state)
				require.NoError(t, err)
				got := map[string]bool{}
				for _, e := range ents {
					if !strings.HasSuffix(e.Name(), ".json") {
						got[e.Name()] = true
					}
				}
				assert.Equal(t, liveNames, got, "%s: only the live owner's scratch files stay", what)
			}
			plant()
			r, err := workspace.Prepare(ctx(t), e.spec, opts...)
			require.NoError(t, err)
			check("after the Prepare")
			plant()
			write(t, e.remote, "a", "2\n")
			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, res.Updated)
			check("after the Restore")
		})
	}
}

// TestStaleRefLockNamed: a lock on the local branch that stays through
// every attempt of the restore's compare-and-swap (a git killed while it
// updated the ref) fails the Restore with ErrRace naming the lock and what
// to do, not as a ref that kept moving; removing it, the Restore completes.
func TestStaleRefLockNamed(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	r := prepareOneFile(t, e, "git")
	write(t, e.remote, "b", "agent\n")
	git(t, e.remote, "add", "b")
	git(t, e.remote, "commit", "-q", "-m", "agent")
	lock := filepath.Join(e.local, ".git", "refs", "heads", "main.lock")
	write(t, filepath.Dir(lock), "main.lock", "")
	head := git(t, e.local, "rev-parse", "HEAD")
	_, err := r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrRace)
	assert.ErrorContains(t, err, "the lock "+lock+" of the ref of HEAD of "+e.local+" stayed through each of")
	assert.ErrorContains(t, err, "remove "+lock+" and run Restore again")
	assert.Equal(t, head, git(t, e.local, "rev-parse", "HEAD"))
	require.NoError(t, os.Remove(lock))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Commits)
	assert.Equal(t, "agent\n", read(t, e.local, "b"))
}

// TestPrepareRemovesHalfPacks: the half-written pack files a sandbox git
// killed in the middle of a Prepare leaves (objects/pack/tmp_*) are removed
// by the next Prepare, which then round-trips.
func TestPrepareRemovesHalfPacks(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	_, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)
	for _, n := range []string{"tmp_pack_Ab12Cd", "tmp_idx_Ab12Cd", "tmp_rev_Ab12Cd"} {
		write(t, e.remote, ".git/objects/pack/"+n, "PACK half")
	}
	roundTripAfter(t, e, "half-packs")
	ents, err := os.ReadDir(filepath.Join(e.remote, ".git", "objects", "pack"))
	require.NoError(t, err)
	for _, f := range ents {
		assert.False(t, strings.HasPrefix(f.Name(), "tmp_"), "half-written pack file %s left", f.Name())
	}
}

// TestFailedWriteTmpSwept: a write of a Restore fails because the user
// renamed the file's directory away at that moment (an editor's refactor)
// and back after: the temporary file moved with the directory, so the
// failed write could not remove it. The failed Restore keeps its journal,
// and the next Restore in the same process (the host did not restart)
// sweeps the file: it brings the agent's file and leaves no temporary
// file in the work tree (one there would be committed by a `git add -A`).
func TestFailedWriteTmpSwept(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			seed(t, e.local, kind, map[string]string{"d/f": "1\n", "d/g": "1\n"})
			d, away := filepath.Join(e.local, "d"), filepath.Join(e.local, "d.away")
			moved := false
			r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithBeforePlace(func(tmp, rel string) {
				if rel == "d/f" && !moved {
					moved = true
					require.NoError(t, os.Rename(d, away))
				}
			}))
			require.NoError(t, err)
			write(t, e.remote, "d/f", "agent\n")

			_, err = r.Restore(ctx(t))
			require.True(t, moved, "the Restore never wrote d/f")
			require.Error(t, err, "d/f could not be written")
			require.NoError(t, os.Rename(away, d)) // the user's rename back
			left := tmpFiles(t, e.local)
			if kind == "git" {
				require.Len(t, left, 1, "the failed write's temporary file, moved back with d")
				assert.True(t, strings.HasPrefix(left[0], "d/"), "%v", left)
				assert.NotEmpty(t, journals(t, journalDir(e.local, kind)), "the failed Restore keeps its journal")
			} else {
				// A plain round spools in the runtime directory and renames
				// into d: nothing of the failed write is in d.
				assert.Empty(t, left)
			}

			res, err := r.Restore(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []string{"d/f"}, res.Updated)
			assert.Equal(t, "agent\n", read(t, e.local, "d/f"))
			assert.Equal(t, "1\n", read(t, e.local, "d/g"))
			assert.Empty(t, tmpFiles(t, e.local), "a temporary file stayed in the work tree")
			assert.Empty(t, journals(t, journalDir(e.local, kind)), "a journal stayed")
			if kind == "git" {
				assert.Equal(t, " M d/f\n", git(t, e.local, "status", "--porcelain", "--untracked-files=all", "--", "d"), "d holds the agent's change and nothing else")
			}
		})
	}
}
