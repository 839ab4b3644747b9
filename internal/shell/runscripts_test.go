package shell_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
)

// shRun runs script under sh with stdin; it returns stdout, stderr and the
// exit status (-1 when a signal ended it).
func shRun(t *testing.T, sh []string, script string, stdin io.Reader) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(sh[0], append(sh[1:], "-c", script)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a supervisor's kill 0 stays in its group
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		status = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", sh, err)
	}
	return out.String(), errb.String(), status
}

// stageTree is the tree the stage scripts' test publishes: a directory
// and two files.
func stageTree(t *testing.T) (io.Reader, []byte) {
	t.Helper()
	var buf bytes.Buffer
	manifest, err := shell.WriteStream(&buf, time.Unix(1e9, 0), func(fn func(shell.Entry, io.Reader) error) ([]byte, error) {
		for _, e := range []struct {
			e    shell.Entry
			body string
		}{{shell.Entry{Path: "d", Mode: os.ModeDir | 0o750}, ""}, {shell.Entry{Path: "d/f", Mode: 0o644, Size: 7}, "content"}, {shell.Entry{Path: "x", Mode: 0o600, Size: 5}, "carry"}} {
			if err := fn(e.e, strings.NewReader(e.body)); err != nil {
				return nil, err
			}
		}
		return []byte(`{"manifest":1}`), nil
	})
	require.NoError(t, err)
	return &buf, manifest
}

// report parses a send or carry command's stdout.
func report(t *testing.T, out string, want map[string]string) *shell.Report {
	t.Helper()
	rep := shell.NewReport(want)
	rep.Read(strings.NewReader(out), func() {})
	<-rep.Done
	require.NoError(t, rep.Err, "%q", out)
	return rep
}

// deadPid returns the pid of a process that has ended.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// TestStageScriptsRun runs package stage's scripts under sh, dash and
// busybox sh over a real directory: a send with the tools learnt, its
// publish, a probe that reads the manifest back, a send whose carry copies
// a file from the published copy and hashes it (embedded and as a command
// of its own), its cleanup, the list of assets, a sweep of what a dead
// process left, a root that is a link, and the removal.
func TestStageScriptsRun(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "it's a root")
			dst, mf := filepath.Join(root, "a"), filepath.Join(root, shell.ManifestName("a"))
			tmp := filepath.Join(root, shell.TempPrefix+"a-0011")
			stream, manifest := stageTree(t)
			out, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst, Detect: true}), stream)
			require.Equal(t, 0, status, "send: %s", stderr)
			rep := report(t, out, nil)
			require.True(t, strings.HasPrefix(out, shell.ProbeHeader), "%q", out)
			caps, err := shell.ParseCaps(rep.Caps)
			require.NoError(t, err)
			require.Empty(t, caps.Missing)
			assert.FileExists(t, filepath.Join(tmp, shell.TarComplete))
			owner, err := os.ReadFile(filepath.Join(tmp, shell.OwnerFile))
			require.NoError(t, err)
			assert.Regexp(t, `^[0-9]+\n`, string(owner))

			out, stderr, status = shRun(t, sh, shell.PublishScript(tmp, dst, mf, "a", caps.Exchange, caps.Exchange, nil), nil)
			require.Equal(t, 0, status, "publish: %s", stderr)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.Equal(t, "content", readString(t, filepath.Join(dst, "d", "f")))
			assert.Equal(t, string(manifest), readString(t, mf))
			assert.NoDirExists(t, tmp)
			fi, err := os.Stat(filepath.Join(dst, "d"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm(), "the modes script ran")

			out, _, status = shRun(t, sh, shell.ProbeScript(root, false, shell.Skip{}, []string{"a", "b"}), nil)
			require.Equal(t, 0, status)
			probe, err := shell.ReadProbe(strings.NewReader(out), []string{shell.ManifestName("a"), shell.ManifestName("b")}, 1<<10, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, [][]byte{manifest, nil}, probe.Files)
			assert.False(t, probe.Asked || probe.Leftovers)

			// The copy's directory gone (or a file in its place), its
			// manifest left: no manifest is sent, the asset is staged again.
			require.NoError(t, os.Rename(dst, dst+".away"))
			for _, planted := range []string{"nothing", "a file", "a link to the copy"} {
				switch planted {
				case "a file":
					require.NoError(t, os.WriteFile(dst, []byte("not the copy"), 0o644))
				case "a link to the copy":
					require.NoError(t, os.Remove(dst))
					require.NoError(t, os.Symlink(filepath.Base(dst)+".away", dst))
				}
				out, _, status = shRun(t, sh, shell.ProbeScript(root, false, shell.Skip{}, []string{"a", "b"}), nil)
				require.Equal(t, 0, status)
				probe, err = shell.ReadProbe(strings.NewReader(out), []string{shell.ManifestName("a"), shell.ManifestName("b")}, 1<<10, 1<<20)
				require.NoError(t, err)
				assert.Equal(t, [][]byte{nil, nil}, probe.Files, "a manifest without its copy (%s there)", planted)
			}
			require.NoError(t, os.Remove(dst))
			require.NoError(t, os.Rename(dst+".away", dst))

			sum := sha256.Sum256([]byte("carry"))
			want := map[string]string{"x": hex.EncodeToString(sum[:])}
			plan := shell.PlanCarry([]shell.CarryFile{{Path: "x", Mode: 0o600, Size: 5, SHA256: want["x"]}, {Path: "missing", Mode: 0o644, SHA256: want["x"]}})
			tmp2 := filepath.Join(root, shell.TempPrefix+"a-0022")
			stream, _ = stageTree(t)
			out, stderr, status = shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp2, Dst: dst, Hash: caps.SHA256, Carry: &plan}), stream)
			require.Equal(t, 0, status, "send with a carry: %s", stderr)
			assert.Equal(t, map[string]bool{"x": true}, report(t, out, plan.Want).Hashes, "stderr: %s", stderr)
			assert.Equal(t, "carry", readString(t, filepath.Join(tmp2, "new", "tree", "x")))

			out, stderr, status = shRun(t, sh, shell.CarryScript(&plan, tmp2, dst), nil)
			require.Equal(t, 0, status, "carry: %s", stderr)
			assert.Equal(t, map[string]bool{"x": true}, report(t, out, plan.Want).Hashes)

			out, stderr, status = shRun(t, sh, shell.CleanupScript(tmp2, dst, "a"), nil)
			require.Equal(t, 0, status, "cleanup: %s", stderr)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.NoDirExists(t, tmp2)
			assert.FileExists(t, filepath.Join(dst, "d", "f"), "the copy in place stays")

			out, _, status = shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, []string{shell.ManifestName("a")}, shell.ParseAssetList([]byte(out)))
			assert.False(t, shell.AssetListLeftovers([]byte(out)))

			left := filepath.Join(root, shell.TempPrefix+"z-00")
			require.NoError(t, os.MkdirAll(filepath.Join(left, "new"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(left, shell.OwnerFile), []byte(strconv.Itoa(deadPid(t))+"\n"), 0o600))
			out, _, status = shRun(t, sh, shell.ProbeScript(root, false, shell.Skip{}, nil), nil)
			require.Equal(t, 0, status)
			probe, err = shell.ReadProbe(strings.NewReader(out), nil, 0, 1<<10)
			require.NoError(t, err)
			assert.True(t, probe.Leftovers, "a dead owner's directory is reported")
			out, _, status = shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status)
			assert.True(t, shell.AssetListLeftovers([]byte(out)), "the asset listing reports it too: %q", out)
			assert.Equal(t, []string{shell.ManifestName("a"), shell.LeftoversLine + "\n"}, shell.ParseAssetList([]byte(out)))
			out, _, status = shRun(t, sh, shell.AssetsScript(root, shell.Skip{Names: []string{filepath.Base(left)}}), nil)
			require.Equal(t, 0, status)
			assert.False(t, shell.AssetListLeftovers([]byte(out)), "a directory the host still uses is no leftover")
			out, _, status = shRun(t, sh, shell.SweepRootScript(root, shell.Skip{Names: []string{filepath.Base(left)}}), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.DirExists(t, left, "a directory the host still uses is left alone")
			out, _, status = shRun(t, sh, shell.SweepRootScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.NoDirExists(t, left)

			// Names the host gave out after the skip was read (its tag, a higher
			// number) are in use; its older ones, and another host's, are not.
			dead := strconv.Itoa(deadPid(t)) + "\n"
			later, older, other := shell.TempPrefix+"z-1f2e3d4c-0a1b2c3d00000009", shell.TempPrefix+"z-5a6b7c8d-0a1b2c3d00000005", shell.TempPrefix+"z-1f2e3d4c-ffffffff00000009"
			for _, d := range []string{later, older, other} {
				require.NoError(t, os.MkdirAll(filepath.Join(root, d, "new"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(root, d, shell.OwnerFile), []byte(dead), 0o600))
			}
			tagged := shell.Skip{Tag: "0a1b2c3d", Seq: 5}
			out, _, status = shRun(t, sh, shell.SweepRootScript(root, tagged), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.DirExists(t, filepath.Join(root, later), "named after the skip was read")
			assert.NoDirExists(t, filepath.Join(root, older))
			assert.NoDirExists(t, filepath.Join(root, other))
			out, _, status = shRun(t, sh, shell.ProbeScript(root, false, tagged, nil), nil)
			require.Equal(t, 0, status)
			probe, err = shell.ReadProbe(strings.NewReader(out), nil, 0, 1<<10)
			require.NoError(t, err)
			assert.False(t, probe.Leftovers, "a directory named after the skip was read is no leftover")
			out, _, status = shRun(t, sh, shell.SweepRootScript(root, shell.Skip{Tag: "0a1b2c3d", Seq: 9}), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			assert.NoDirExists(t, filepath.Join(root, later))

			link := filepath.Join(t.TempDir(), "link")
			require.NoError(t, os.Symlink(root, link))
			_, stderr, status = shRun(t, sh, shell.AssetsScript(link, shell.Skip{}), nil)
			assert.Equal(t, shell.RootLinkExit, status)
			assert.Contains(t, stderr, "is a symbolic link")
			_, _, status = shRun(t, sh, shell.RemoveScript(link, shell.TempPrefix+"unstage-00", shell.Skip{}, []string{"a"}, nil), nil)
			assert.Equal(t, shell.RootLinkExit, status)
			assert.DirExists(t, dst)

			out, stderr, status = shRun(t, sh, shell.RemoveScript(root, shell.TempPrefix+"unstage-00", shell.Skip{}, []string{"a", "never"}, nil), nil)
			require.Equal(t, 0, status, "remove: %s", stderr)
			assert.Equal(t, shell.PublishedLine+"\n", out)
			ents, err := os.ReadDir(root)
			require.NoError(t, err)
			assert.Empty(t, ents, "the asset, its manifest and the temporary directory are gone")
		})
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// TestRemoteWrapperRuns runs remote.Host's wrapper (the env prelude, the
// header and the supervisor) under sh, dash and busybox sh: the
// environment arrives byte-exact and stdin starts after it, the header
// names the supervisor, the script runs in the directory and its status
// comes back; a missing directory and an environment cut short are exit
// 125 with nothing run; a script killed by a signal is reported so.
func TestRemoteWrapperRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's here")
	require.NoError(t, os.Mkdir(dir, 0o755))
	env := map[string]string{"A": "it's\nmulti line", "B": "$(id) `id` \\ *"}
	wrapper := func(dir, script string) string {
		return shell.EnvReader("exit 125") + shell.HeaderScript(dir) + shell.Supervise(script)
	}
	stdin := func(env map[string]string, end bool) io.Reader {
		s := shell.EnvLines(env)
		if end {
			s += shell.EnvEnd + "\n"
		}
		return strings.NewReader(s + "input line\n")
	}
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			script := `printf '%s|%s|' "$A" "$B"; read -r l; printf '%s|' "$l"; pwd; exit 3`
			out, stderr, status := shRun(t, sh, wrapper(dir, script), stdin(env, true))
			assert.Equal(t, 3, status)
			assert.Equal(t, env["A"]+"|"+env["B"]+"|input line|"+dir+"\n", out)
			hw := &shell.HeaderWriter{}
			_, err := hw.Write([]byte(stderr))
			require.NoError(t, err)
			pid, noDir := hw.State()
			assert.Positive(t, pid, "stderr: %q", stderr)
			assert.False(t, noDir)

			out, stderr, status = shRun(t, sh, wrapper(filepath.Join(dir, "missing"), script), stdin(env, true))
			assert.Equal(t, 125, status)
			assert.Empty(t, out)
			hw = &shell.HeaderWriter{}
			_, err = hw.Write([]byte(stderr))
			require.NoError(t, err)
			_, noDir = hw.State()
			assert.True(t, noDir, "stderr: %q", stderr)

			out, _, status = shRun(t, sh, wrapper(dir, script), stdin(env, false))
			assert.Equal(t, 125, status, "an environment without its end runs nothing")
			assert.Empty(t, out)

			cmd := exec.Command(sh[0], append(sh[1:], "-c", wrapper("", `kill -TERM $$; sleep 5`))...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stdin = stdin(nil, true)
			err = cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGTERM, "the supervisor re-raises the script's signal: %v", ws)
		})
	}
}

// TestWatchEndRuns runs sandbox.Watch's end wrapper under each shell: the
// script's stderr passes through, the end line comes once the script has
// ended and is not passed on, and the status is the script's. A line
// that only starts like the end line is passed on whole.
func TestWatchEndRuns(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			_, stderr, status := shRun(t, sh, shell.WatchEndScript(`printf 'partial' >&2; echo `+shell.WatchEndLine+`-not >&2; exit 4`), nil)
			assert.Equal(t, 4, status)
			var dst bytes.Buffer
			ends := 0
			w := &shell.EndLineWriter{Dst: &dst, OnEnd: func() { ends++ }}
			for i := 0; i < len(stderr); i += 3 { // in pieces, as a pipe may deliver it
				_, err := w.Write([]byte(stderr[i:min(i+3, len(stderr))]))
				require.NoError(t, err)
			}
			assert.Equal(t, 1, ends, "%q", stderr)
			assert.Equal(t, "partial"+shell.WatchEndLine+"-not\n\n", dst.String())
		})
	}
}

// TestEndLineWriterFails: a destination that fails fails the write.
func TestEndLineWriterFails(t *testing.T) {
	boom := errors.New("disk full")
	w := &shell.EndLineWriter{Dst: failWriter{boom}}
	_, err := w.Write([]byte("x\n"))
	require.ErrorIs(t, err, boom)
	n, err := (&shell.EndLineWriter{Dst: failWriter{boom}}).Write([]byte(shell.WatchEndLine + "\n"))
	require.NoError(t, err, "nothing to pass on")
	assert.Equal(t, len(shell.WatchEndLine)+1, n)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// TestSessionCommandAndStop runs remote.Host's session command under each
// shell as an SSH server's shell would, then stops its supervisor with
// the stop script: the script's TERM-ignoring child is gone.
func TestSessionCommandAndStop(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			script := `trap '' TERM; echo started; sleep 30`
			cmd := exec.Command(sh[0], append(sh[1:], "-c", shell.SessionCommand(shell.HeaderScript("")+shell.Supervise(script)))...)
			// A session of its own, as an SSH server gives it: the
			// supervisor's TERM trap kills its whole process group.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			hw := &shell.HeaderWriter{}
			cmd.Stderr = hw
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			line := make([]byte, len("started\n"))
			_, err = io.ReadFull(stdout, line)
			require.NoError(t, err)
			// The header is on stderr, which os/exec copies into hw on a
			// goroutine of its own: it can arrive after stdout's line.
			var pid int
			require.Eventually(t, func() bool { pid, _ = hw.State(); return pid > 0 }, 10*time.Second, time.Millisecond,
				"the supervisor's header never arrived on stderr")
			_, _, status := shRun(t, sh, shell.StopSupervisorScript(pid), nil)
			assert.Equal(t, 0, status)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "the session ended by a signal")
			case <-time.After(10 * time.Second):
				require.NoError(t, cmd.Process.Kill())
				t.Fatal("the session did not end once its supervisor was stopped")
			}
			// The session's group (its leader's pid) must be empty: the
			// sleep that ignores TERM was killed too.
			deadline := time.Now().Add(5 * time.Second)
			for syscall.Kill(-cmd.Process.Pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			assert.ErrorIs(t, syscall.Kill(-cmd.Process.Pid, 0), syscall.ESRCH, "a process of the session is left")
		})
	}
}

// TestCarryLinksVouchedFiles runs a publish and then carries under sh,
// dash and busybox sh: the publish records the copy's stamps; a file whose
// stamp and mode are unchanged is carried as a hard link into the previous
// copy's inode and reported on a LinkedLine; a file rewritten in place
// (same size), one whose mode changed and every file once the stamps are
// gone are copied and hashed instead, and the previous copy is left as it
// was.
func TestCarryLinksVouchedFiles(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "it's a root")
			dst := publishTree(t, sh, root)
			stamps := filepath.Join(root, shell.StampsName("a"))
			rec := readString(t, stamps)
			assert.Regexp(t, `(?m)^[0-9]+ 7 .+ \./d/f$`, rec)
			assert.Regexp(t, `(?m)^[0-9]+ 5 .+ \./x$`, rec)

			time.Sleep(20 * time.Millisecond) // past the file system's clock tick
			require.NoError(t, os.WriteFile(filepath.Join(dst, "d", "f"), []byte("CONTENT"), 0o644))
			plan := shell.PlanCarry([]shell.CarryFile{{Path: "x", Mode: 0o600, Size: 5, SHA256: sum("carry")}, {Path: "d/f", Mode: 0o644, Size: 7, SHA256: sum("content")}, {Path: "missing", Mode: 0o644, SHA256: sum("x")}})
			plan.Manifest = sum(readString(t, filepath.Join(root, shell.ManifestName("a"))))
			carry := func(name string) (tree string, linked []string, hashes map[string]bool) {
				t.Helper()
				tmp := filepath.Join(root, shell.TempPrefix+name)
				require.NoError(t, os.MkdirAll(tmp, 0o700))
				out, stderr, status := shRun(t, sh, shell.CarryScript(&plan, tmp, dst), nil)
				require.Equal(t, 0, status, "carry: %s", stderr)
				for l := range strings.SplitSeq(out, "\n") {
					if p, ok := strings.CutPrefix(l, shell.LinkedLine); ok {
						linked = append(linked, p)
					}
				}
				return filepath.Join(tmp, "new", "tree"), linked, report(t, out, plan.Want).Hashes
			}
			good := plan.Manifest
			plan.Manifest = sum(`{"manifest":2}`)
			_, linked, hashes := carry("a-001")
			assert.Empty(t, linked, "the manifest is not the one the plan was made from (a publish in between): no file is vouched for")
			assert.Equal(t, map[string]bool{"x": true}, hashes, "x is copied and hashed instead")
			plan.Manifest = ""
			_, linked, _ = carry("a-002")
			assert.Empty(t, linked, "no manifest digest, no links")
			plan.Manifest = good
			tree, linked, hashes := carry("a-01")
			assert.Equal(t, []string{"x"}, linked, "only the untouched file is vouched for")
			assert.Equal(t, map[string]bool{"x": true}, hashes, "the rewritten file's copy has other bytes: it is sent")
			assert.True(t, sameFile(t, filepath.Join(tree, "x"), filepath.Join(dst, "x")), "x is a link into the previous copy")
			assert.False(t, sameFile(t, filepath.Join(tree, "d", "f"), filepath.Join(dst, "d", "f")), "d/f is a copy")
			assert.NoFileExists(t, filepath.Join(tree, "missing"))

			time.Sleep(20 * time.Millisecond)
			require.NoError(t, os.Chmod(filepath.Join(dst, "x"), 0o640))
			tree, linked, hashes = carry("a-02")
			assert.Empty(t, linked, "a mode change is no stamp match")
			assert.Equal(t, map[string]bool{"x": true}, hashes)
			assert.False(t, sameFile(t, filepath.Join(tree, "x"), filepath.Join(dst, "x")))
			fi, err := os.Stat(filepath.Join(dst, "x"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the previous copy keeps its mode")
			fi, err = os.Stat(filepath.Join(tree, "x"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the copy has the manifest's")

			require.NoError(t, os.Chmod(filepath.Join(dst, "x"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dst, "d", "f"), []byte("content"), 0o644))
			for _, junk := range []string{"j1", "j2", "j3", "j4", "j5"} {
				require.NoError(t, os.WriteFile(filepath.Join(dst, junk), []byte(junk), 0o644))
			}
			tree, linked, hashes = carry("a-025")
			assert.Empty(t, linked, "two of seven files vouched for: copying them beats linking the whole copy")
			assert.Equal(t, map[string]bool{"x": true, "d/f": true}, hashes)
			assert.NoFileExists(t, filepath.Join(tree, "j1"), "what the sandbox added stays out")

			// A plan that names six of the seven files (j5 left the
			// source): the link starts while the stamps are matched, and is
			// deleted once two of seven turn out vouched.
			all := []shell.CarryFile{{Path: "x", Mode: 0o600, Size: 5, SHA256: sum("carry")}, {Path: "d/f", Mode: 0o644, Size: 7, SHA256: sum("content")}}
			want := map[string]bool{"x": true, "d/f": true}
			for _, junk := range []string{"j1", "j2", "j3", "j4"} {
				all, want[junk] = append(all, shell.CarryFile{Path: junk, Mode: 0o644, Size: int64(len(junk)), SHA256: sum(junk)}), true
			}
			narrow := plan
			plan = shell.PlanCarry(all)
			plan.Manifest = good
			tree, linked, hashes = carry("a-026")
			assert.Empty(t, linked, "two of seven files vouched for: the link is undone")
			assert.Equal(t, want, hashes, "every planned file is copied and hashed")
			assert.False(t, sameFile(t, filepath.Join(tree, "x"), filepath.Join(dst, "x")), "x is a copy, not the link")
			assert.False(t, sameFile(t, filepath.Join(tree, "j1"), filepath.Join(dst, "j1")), "j1 is a copy, not the link")
			assert.NoFileExists(t, filepath.Join(tree, "j5"), "no file the plan leaves out stays from the link")
			plan = narrow

			require.NoError(t, os.Remove(stamps))
			_, linked, hashes = carry("a-03")
			assert.Empty(t, linked, "no stamps, no links")
			assert.Equal(t, map[string]bool{"x": true, "d/f": true}, hashes)
		})
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	require.NoError(t, err)
	fb, err := os.Stat(b)
	require.NoError(t, err)
	return os.SameFile(fa, fb)
}

// TestCarryRaceSwappedFile: a file of the previous copy replaced between
// the stamp check and the link (here by a cp that swaps it first, as an
// agent racing the stage would) is not reported linked and is taken out
// of the new tree, so the host sends it; its neighbour is still linked.
func TestCarryRaceSwappedFile(t *testing.T) {
	cpPath, err := exec.LookPath("cp")
	require.NoError(t, err)
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			dst := publishTree(t, sh, root)

			bin := t.TempDir()
			swap := "#!/bin/sh\nif [ \"$1\" = -al ]; then printf CARRY >x.new && mv -f x.new x; fi\nexec " + cpPath + " \"$@\"\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "cp"), []byte(swap), 0o755))
			if out, _, _ := shRun(t, sh, "PATH="+bin+":$PATH\ncommand -v cp", nil); strings.TrimSpace(out) != filepath.Join(bin, "cp") {
				t.Skipf("%s runs its own cp (%q), not one from PATH: the swap cannot be planted", sh[0], strings.TrimSpace(out))
			}
			sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
			plan := shell.PlanCarry([]shell.CarryFile{{Path: "x", Mode: 0o600, Size: 5, SHA256: sum("carry")}, {Path: "d/f", Mode: 0o644, Size: 7, SHA256: sum("content")}})
			plan.Manifest = sum(readString(t, filepath.Join(root, shell.ManifestName("a"))))
			tmp2 := filepath.Join(root, shell.TempPrefix+"a-02")
			require.NoError(t, os.MkdirAll(tmp2, 0o700))
			out, stderr, status := shRun(t, sh, "PATH="+bin+":$PATH\n"+shell.CarryScript(&plan, tmp2, dst), nil)
			require.Equal(t, 0, status, "carry: %s", stderr)
			assert.Contains(t, out, shell.LinkedLine+"d/f\n")
			assert.NotContains(t, out, shell.LinkedLine+"x\n")
			assert.Equal(t, map[string]bool{"d/f": true}, report(t, out, plan.Want).Hashes, "x is sent")
			assert.NoFileExists(t, filepath.Join(tmp2, "new", "tree", "x"), "the swapped file is taken out before the stream")
			assert.Equal(t, "CARRY", readString(t, filepath.Join(dst, "x")), "the copy in place is the sandbox's own business")
		})
	}
}

// publishTree sends stageTree's tree to root/a under sh and publishes it;
// it returns the copy's path.
func publishTree(t *testing.T, sh []string, root string) string {
	t.Helper()
	dst, mf := filepath.Join(root, "a"), filepath.Join(root, shell.ManifestName("a"))
	tmp := filepath.Join(root, shell.TempPrefix+"a-0011")
	stream, _ := stageTree(t)
	_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst, Hash: true}), stream)
	require.Equal(t, 0, status, "send: %s", stderr)
	_, stderr, status = shRun(t, sh, shell.PublishScript(tmp, dst, mf, "a", false, false, nil), nil)
	require.Equal(t, 0, status, "publish: %s", stderr)
	return dst
}

// TestPublishRaceOtherCopy: another stage (an uncoordinated host) puts its
// copy at the asset's name between this publish moving the old copy aside
// and moving the new one in. The publish fails and leaves the other copy
// as it was: mv would have moved the new tree into it as a subdirectory.
// Run with an mv that has -T and with one that has not (BSD), whose
// check before the rename leaves an instant this test does not hit.
func TestPublishRaceOtherCopy(t *testing.T) {
	mvPath, err := exec.LookPath("mv")
	require.NoError(t, err)
	for _, sh := range shells(t) {
		for _, noT := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/noT=%v", strings.Join(sh, " "), noT), func(t *testing.T) {
				root := filepath.Join(t.TempDir(), "root")
				dst := publishTree(t, sh, root)
				mf := filepath.Join(root, shell.ManifestName("a"))
				tmp := filepath.Join(root, shell.TempPrefix+"a-02")
				stream, _ := stageTree(t)
				_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst}), stream)
				require.Equal(t, 0, status, "send: %s", stderr)

				bin := t.TempDir()
				shim := "#!/bin/sh\nfor a; do case \"$a\" in */new/tree) mkdir -p " + shell.Quote(dst) + " && echo other >" + shell.Quote(filepath.Join(dst, "other")) + ";; esac; done\n"
				if noT {
					shim += "case \"$1\" in -T) echo 'mv: illegal option -- T' >&2; exit 64;; esac\n"
				}
				shim += "exec " + mvPath + " \"$@\"\n"
				require.NoError(t, os.WriteFile(filepath.Join(bin, "mv"), []byte(shim), 0o755))
				if out, _, _ := shRun(t, sh, "PATH="+bin+":$PATH\ncommand -v mv", nil); strings.TrimSpace(out) != filepath.Join(bin, "mv") {
					t.Skipf("%s runs its own mv (%q), not one from PATH: the other copy cannot be planted", sh[0], strings.TrimSpace(out))
				}
				_, stderr, status = shRun(t, sh, "PATH="+bin+":$PATH\n"+shell.PublishScript(tmp, dst, mf, "a", false, false, nil), nil)
				assert.Equal(t, 4, status, "the publish fails: %s", stderr)
				assert.Contains(t, stderr, "cannot move the new copy to "+dst+": it is in use, or another stage put one there meanwhile; stage again")
				names, err := os.ReadDir(dst)
				require.NoError(t, err)
				require.Len(t, names, 1, "the other copy holds its own file only: %v", names)
				assert.Equal(t, "other", names[0].Name())
				assert.DirExists(t, filepath.Join(tmp, "new", "tree"), "the new tree stays in the temporary directory, which cleanup removes")
			})
		}
	}
}

// TestSweepMarkerRuns runs the sweep markers' scripts under sh, dash and
// busybox sh: a publish deletes its marker as its last step; one killed
// after putting it in place leaves it naming its dead shell, which the
// probe and the asset listing report and a sweep deletes with the
// temporary directory; a live process's marker stays; and what the
// sandbox plants at a marker's name (a directory, a fifo, a link, a huge
// file) is reported and swept without hanging, a link never followed.
func TestSweepMarkerRuns(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err, "the test needs procfs")
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			dst := publishTree(t, sh, root)
			marker := filepath.Join(root, shell.SweepMarkerName("a"))
			assert.NoFileExists(t, marker, "a publish that ends deletes its marker")

			// Killed once its marker is in place: the modes script kills
			// the publish's shell ($$ in a subshell is its parent's).
			tmp := filepath.Join(root, shell.TempPrefix+"a-02")
			stream, _ := stageTree(t)
			_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst}), stream)
			require.Equal(t, 0, status, "send: %s", stderr)
			f, err := os.OpenFile(filepath.Join(tmp, "modes"), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("kill -9 $$\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, _, status = shRun(t, sh, shell.PublishScript(tmp, dst, filepath.Join(root, shell.ManifestName("a")), "a", false, true, nil), nil)
			require.Equal(t, -1, status, "the publish is killed")
			assert.Regexp(t, `^[0-9]+\n`, readString(t, marker), "the killed publish's marker names it")
			assert.DirExists(t, tmp)
			assert.True(t, markerProbe(t, sh, root), "a dead publish's marker and directory are reported")
			sweepRoot(t, sh, root)
			assert.NoDirExists(t, tmp)
			assert.NoFileExists(t, marker, "the sweep deletes the dead publish's marker")

			// A marker alone is a leftover when its process is gone or of
			// another PID namespace; a live process's is not.
			for _, c := range []struct {
				owner string
				dead  bool
			}{
				{strconv.Itoa(deadPid(t)) + "\n", true},
				{strconv.Itoa(os.Getpid()) + "\npid:[1]\n", true},
				{"not a pid\n", true},
				{strconv.Itoa(os.Getpid()) + "\n" + ns + "\n", false},
			} {
				require.NoError(t, os.WriteFile(marker, []byte(c.owner), 0o644))
				assert.Equal(t, c.dead, markerProbe(t, sh, root), "marker %q", c.owner)
				out, _, status := shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
				require.Equal(t, 0, status)
				assert.Equal(t, c.dead, shell.AssetListLeftovers([]byte(out)), "marker %q", c.owner)
				sweepRoot(t, sh, root)
				_, err := os.Lstat(marker)
				assert.Equal(t, c.dead, errors.Is(err, os.ErrNotExist), "marker %q: the sweep deletes it exactly when it is no live process's", c.owner)
			}
			require.NoError(t, os.Remove(marker))

			// What the sandbox plants at a marker's name.
			outDir := t.TempDir()
			outside := filepath.Join(outDir, "outside")
			require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o644))
			planted := map[string]func(p string) error{
				"dir": func(p string) error {
					return errors.Join(os.MkdirAll(filepath.Join(p, "d"), 0o755), os.WriteFile(filepath.Join(p, shell.OwnerFile), []byte("1\n"), 0o644))
				},
				"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o644) },
				"link":    func(p string) error { return os.Symlink(outside, p) },
				"dirlink": func(p string) error { return os.Symlink(outDir, p) },
				"huge":    func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("1"), 8<<20), 0o644) },
			}
			for n, plant := range planted {
				require.NoError(t, plant(filepath.Join(root, shell.SweepMarkerName(n))), n)
			}
			start := time.Now()
			assert.True(t, markerProbe(t, sh, root), "planted markers are reported")
			sweepRoot(t, sh, root)
			assert.Less(t, time.Since(start), 20*time.Second, "reading planted markers must not hang")
			for n := range planted {
				_, err := os.Lstat(filepath.Join(root, shell.SweepMarkerName(n)))
				assert.ErrorIs(t, err, os.ErrNotExist, "the planted %s is swept", n)
			}
			assert.Equal(t, "keep", readString(t, outside), "a linked marker is never followed")
			assert.False(t, markerProbe(t, sh, root))

			// A publish over a planted link, directory or file puts its
			// own marker in place and deletes it; what a link names stays.
			for _, n := range []string{"link", "dirlink", "dir", "huge"} {
				require.NoError(t, planted[n](marker))
				dst = publishTree(t, sh, root)
				_, err := os.Lstat(marker)
				assert.ErrorIs(t, err, os.ErrNotExist, "a publish over a planted %s", n)
				assert.Equal(t, "keep", readString(t, outside))
				ents, err := os.ReadDir(outDir)
				require.NoError(t, err)
				assert.Len(t, ents, 1, "nothing lands in a linked directory")
			}
			assert.Equal(t, "content", readString(t, filepath.Join(dst, "d", "f")))
		})
	}
}

// TestOrphanCopyRecord runs the orphan copies' handling (O) under sh,
// dash and busybox sh: a copy without its manifest beside its sweep
// marker is listed as an asset unless the marker names a live process (a
// publish at work), and neither the sweep nor the leftover check touches
// it or its marker, whoever the marker names (a dead or live process, one
// of another PID namespace, none); a dead marker beside
// a copy that has its manifest, or beside nothing, is a leftover the sweep
// deletes. A removal killed between the manifest and the copy leaves such
// a record, and the next removal of the asset deletes copy and marker.
func TestOrphanCopyRecord(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err, "the test needs procfs")
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			dead := strconv.Itoa(deadPid(t)) + "\n" + ns + "\n"
			for _, c := range []struct {
				name            string
				owner           string
				manifest, there bool
				listed, swept   bool // the asset is listed; the marker is a leftover the sweep deletes
			}{
				{"dead", dead, false, true, true, false},
				{"dead, no namespace", strconv.Itoa(deadPid(t)) + "\n", false, true, true, false},
				{"live", strconv.Itoa(os.Getpid()) + "\n" + ns + "\n", false, true, false, false}, // a publish at work: not listed
				{"another namespace", strconv.Itoa(os.Getpid()) + "\npid:[1]\n", false, true, true, false},
				{"no process", "not a pid\n", false, true, true, false},
				{"dead, manifest kept", dead, true, true, true, true},
				{"dead, no copy", dead, false, false, false, true},
			} {
				root := filepath.Join(t.TempDir(), "root")
				dst := publishTree(t, sh, root)
				mf, marker := filepath.Join(root, shell.ManifestName("a")), filepath.Join(root, shell.SweepMarkerName("a"))
				if !c.manifest {
					require.NoError(t, os.Remove(mf))
				}
				if !c.there {
					require.NoError(t, os.RemoveAll(dst))
				}
				require.NoError(t, os.WriteFile(marker, []byte(c.owner), 0o644))
				out, _, status := shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
				require.Equal(t, 0, status)
				listed := shell.ParseAssetList([]byte(strings.TrimSuffix(out, shell.LeftoversLine+"\n")))
				if c.listed {
					assert.Equal(t, []string{shell.ManifestName("a")}, listed, "%s: listed once", c.name)
				} else {
					assert.Empty(t, listed, c.name)
				}
				assert.Equal(t, c.swept, shell.AssetListLeftovers([]byte(out)), "%s: the listing's leftovers", c.name)
				assert.Equal(t, c.swept, markerProbe(t, sh, root), "%s: the probe's leftovers", c.name)
				sweepRoot(t, sh, root)
				_, err := os.Lstat(marker)
				assert.Equal(t, c.swept, errors.Is(err, os.ErrNotExist), "%s: the sweep deletes the marker exactly when it is a leftover", c.name)
				if c.there {
					assert.Equal(t, "content", readString(t, filepath.Join(dst, "d", "f")), "%s: a sweep never touches a copy", c.name)
				}
			}

			// A removal killed between the manifest and the copy.
			root := filepath.Join(t.TempDir(), "root")
			dst := publishTree(t, sh, root)
			script := shell.RemoveScript(root, shell.TempPrefix+"unstage-00", shell.Skip{}, []string{"a"}, nil)
			mvCopy := `mv -f './a' "$t/" || exit 4`
			require.Contains(t, script, mvCopy)
			_, _, status := shRun(t, sh, strings.Replace(script, mvCopy, "kill -9 $$", 1), nil)
			require.Equal(t, -1, status, "the removal is killed")
			assert.DirExists(t, dst)
			assert.NoFileExists(t, filepath.Join(root, shell.ManifestName("a")))
			out, _, status := shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status)
			assert.Equal(t, []string{shell.ManifestName("a")}, shell.ParseAssetList([]byte(strings.TrimSuffix(out, shell.LeftoversLine+"\n"))), "the listing names the orphan copy")
			_, stderr, status := shRun(t, sh, shell.RemoveScript(root, shell.TempPrefix+"unstage-01", shell.Skip{}, []string{"a"}, nil), nil)
			require.Equal(t, 0, status, "remove: %s", stderr)
			ents, err := os.ReadDir(root)
			require.NoError(t, err)
			assert.Empty(t, ents, "the next removal leaves nothing in the root")
		})
	}
}

// TestCleanupAfterKilledPublish: a publish killed at each of its renames,
// then its cleanup, under sh, dash and busybox sh, with and without mv
// --exchange. The cleanup leaves the old copy with its own manifest and
// stamps (it puts them back whenever the publish had moved the old copy
// aside), or a copy without a manifest that keeps its sweep marker and
// that the asset listing names (an orphan copy, which a prune removes);
// and no temporary directory, nor a marker otherwise.
func TestCleanupAfterKilledPublish(t *testing.T) {
	x := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(x, "a"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(x, "b"), 0o755))
	canExchange := exec.Command("mv", "-T", "--exchange", filepath.Join(x, "a"), filepath.Join(x, "b")).Run() == nil
	for _, sh := range shells(t) {
		for _, exchange := range []bool{false, true} {
			if exchange && !canExchange {
				t.Logf("mv has no --exchange here: the exchange is not tested")
				continue
			}
			for i, at := range []string{
				`if [ -d "$d" ] && [ ! -L "$d" ] && [ ! -w "$d" ]`, // the old manifest moved
				`if ! R "$t/new/tree" "$d"`,                        // and the old copy, without an exchange
				`mv -f "$t/new/manifest.json" "$m" || exit 5`,      // the new copy in place
			} {
				// Without an exchange, a publish killed after moving the
				// old copy aside and before putting the new one in place
				// has it put back.
				restored := !exchange && i == 1
				t.Run(fmt.Sprintf("%s/exchange=%v/%s", strings.Join(sh, " "), exchange, at), func(t *testing.T) {
					root := filepath.Join(t.TempDir(), "root")
					dst := publishTree(t, sh, root)
					mf, stamps := filepath.Join(root, shell.ManifestName("a")), filepath.Join(root, shell.StampsName("a"))
					oldCopy, oldManifest := inode(t, dst), inode(t, mf)
					require.FileExists(t, stamps)

					tmp := filepath.Join(root, shell.TempPrefix+"a-0033")
					stream, _ := stageTree(t)
					_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst, Hash: true}), stream)
					require.Equal(t, 0, status, "send: %s", stderr)
					script := shell.PublishScript(tmp, dst, mf, "a", exchange, !exchange, nil)
					require.Contains(t, script, at)
					_, _, status = shRun(t, sh, strings.Replace(script, at, "kill -9 $$; "+at, 1), nil)
					require.Equal(t, -1, status, "the publish is killed")

					out, stderr, status := shRun(t, sh, shell.CleanupScript(tmp, dst, "a"), nil)
					require.Equal(t, 0, status, "cleanup: %s", stderr)
					assert.Equal(t, shell.PublishedLine+"\n", out)
					_, err := os.Lstat(mf)
					orphan := errors.Is(err, os.ErrNotExist)
					if restored || !orphan {
						assert.Equal(t, oldCopy, inode(t, dst), "the copy left is the old one")
						assert.Equal(t, oldManifest, inode(t, mf), "with its own manifest")
						assert.FileExists(t, stamps, "and stamps")
					} else {
						assert.DirExists(t, dst)
						assert.FileExists(t, filepath.Join(root, shell.SweepMarkerName("a")), "an orphan copy keeps its marker")
						out, _, status := shRun(t, sh, shell.AssetsScript(root, shell.Skip{}), nil)
						require.Equal(t, 0, status)
						assert.Equal(t, []string{mf[len(root)+1:]}, shell.ParseAssetList([]byte(out)), "and is listed")
					}
					ents, err := os.ReadDir(root)
					require.NoError(t, err)
					for _, e := range ents {
						left := strings.HasPrefix(e.Name(), shell.TempPrefix) || strings.HasPrefix(e.Name(), shell.GonePrefix) || (!orphan && strings.HasPrefix(e.Name(), shell.SweepPrefix))
						assert.False(t, left, "%s left", e.Name())
					}
				})
			}
		}
	}
}

// inode returns the inode number of p (not followed).
func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// markerProbe runs a probe of root under sh and returns whether it
// reports leftovers.
func markerProbe(t *testing.T, sh []string, root string) bool {
	t.Helper()
	out, stderr, status := shRun(t, sh, shell.ProbeScript(root, false, shell.Skip{}, nil), nil)
	require.Equal(t, 0, status, "probe: %s", stderr)
	probe, err := shell.ReadProbe(strings.NewReader(out), nil, 0, 1<<10)
	require.NoError(t, err)
	return probe.Leftovers
}

// sweepRoot runs SweepRootScript on root under sh.
func sweepRoot(t *testing.T, sh []string, root string) {
	t.Helper()
	out, stderr, status := shRun(t, sh, shell.SweepRootScript(root, shell.Skip{}), nil)
	require.Equal(t, 0, status, "sweep: %s", stderr)
	assert.Equal(t, shell.PublishedLine+"\n", out)
}

// TestPublishTmpSwept: a publish whose temporary directory a sweep of
// another connection took (between the transfer and the publish no
// sandbox process owns it; two uncoordinated Bridges over a sandbox whose
// publish is a command of its own) fails with RenameExit, which the host
// reports retryable, and moves nothing: before the publish started, and
// between its completeness check and its claim (an mv shim takes the
// directory the moment the claim renames the owner file). A directory that
// is there but incomplete stays a broken transfer (status 3).
func TestPublishTmpSwept(t *testing.T) {
	mvPath, err := exec.LookPath("mv")
	require.NoError(t, err)
	for _, sh := range shells(t) {
		for _, when := range []string{"before", "claim", "incomplete"} {
			t.Run(strings.Join(sh, " ")+"/"+when, func(t *testing.T) {
				root := filepath.Join(t.TempDir(), "root")
				dst := publishTree(t, sh, root)
				mf := filepath.Join(root, shell.ManifestName("a"))
				oldMf := readString(t, mf)
				tmp := filepath.Join(root, shell.TempPrefix+"a-02")
				stream, _ := stageTree(t)
				_, stderr, status := shRun(t, sh, shell.SendScript(shell.Send{Root: root, Tmp: tmp, Dst: dst}), stream)
				require.Equal(t, 0, status, "send: %s", stderr)
				require.NoError(t, os.WriteFile(filepath.Join(dst, "d", "f"), []byte("old"), 0o644))
				gone := filepath.Join(root, shell.GonePrefix+"1-0")
				prefix := ""
				switch when {
				case "before":
					require.NoError(t, os.Rename(tmp, gone))
				case "incomplete":
					require.NoError(t, os.Remove(filepath.Join(tmp, "complete")))
				case "claim":
					bin := t.TempDir()
					shim := "#!/bin/sh\nfor a; do case \"$a\" in */" + shell.OwnerFile + ".new) " + mvPath + " " + shell.Quote(tmp) + " " + shell.Quote(gone) + ";; esac; done\nexec " + mvPath + " \"$@\"\n"
					require.NoError(t, os.WriteFile(filepath.Join(bin, "mv"), []byte(shim), 0o755))
					if out, _, _ := shRun(t, sh, "PATH="+bin+":$PATH\ncommand -v mv", nil); strings.TrimSpace(out) != filepath.Join(bin, "mv") {
						t.Skipf("%s runs its own mv (%q), not one from PATH: the directory cannot be taken mid-claim", sh[0], strings.TrimSpace(out))
					}
					prefix = "PATH=" + bin + ":$PATH\n"
				}
				_, stderr, status = shRun(t, sh, prefix+shell.PublishScript(tmp, dst, mf, "a", false, false, nil), nil)
				if when == "incomplete" {
					assert.Equal(t, 3, status, "a broken transfer: %s", stderr)
					assert.Equal(t, "transfer incomplete: "+tmp+" lacks part of the stream\n", stderr)
				} else {
					assert.Equal(t, shell.RenameExit, status, "the publish fails retryably: %s", stderr)
					assert.Contains(t, stderr, "the transfer's temporary directory "+tmp+" is gone: a stage through another connection swept it between the transfer and this publish, and nothing was moved; stage again\n")
					assert.NoDirExists(t, tmp)
				}
				assert.Equal(t, "old", readString(t, filepath.Join(dst, "d", "f")), "the previous copy stays")
				assert.Equal(t, oldMf, readString(t, mf), "its manifest stays")
				_, err := os.Lstat(filepath.Join(root, shell.SweepMarkerName("a")))
				assert.ErrorIs(t, err, os.ErrNotExist, "no marker: nothing was moved")
			})
		}
	}
}

// TestSendPlanIn: a send command that takes its carry plan on stdin, as an
// archive of its own before the stream (where tar stops at its archive's
// end), links or copies what the plan names and then extracts the stream;
// with Detect, a sandbox whose tar reads its input to the end (BusyBox)
// carries the plan embedded in the script instead and reads no plan from
// stdin. A plan cut short ends the command before anything is extracted.
func TestSendPlanIn(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	for _, sh := range shells(t) {
		out, stderr, status := shRun(t, sh, shell.DetectScript+shell.EchoHeader, nil)
		require.Equal(t, 0, status, "detect: %s", stderr)
		caps, err := shell.ParseCaps(strings.TrimSpace(strings.TrimPrefix(out, shell.ProbeHeader)))
		require.NoError(t, err, "%q", out)
		for _, detect := range []bool{false, true} {
			if !detect && !caps.Records {
				continue // a host that knows the sandbox's tar reads to the end never sends the plan on stdin
			}
			t.Run(fmt.Sprintf("%s/detect=%v", strings.Join(sh, " "), detect), func(t *testing.T) {
				root := filepath.Join(t.TempDir(), "a root")
				dst := publishTree(t, sh, root)
				plan := shell.PlanCarry([]shell.CarryFile{{Path: "x", Mode: 0o600, Size: 5, SHA256: sum("carry")}, {Path: "missing", Mode: 0o644, SHA256: sum("x")}})
				plan.Manifest = sum(readString(t, filepath.Join(root, shell.ManifestName("a"))))
				send := func(tmp string, cut int) (string, string, int) {
					t.Helper()
					var in bytes.Buffer
					if caps.Records {
						require.NoError(t, shell.WritePlan(&in, &plan))
						require.Zero(t, in.Len()%shell.TarRecord, "the plan's archive is padded to whole records")
					}
					if cut > 0 {
						in.Truncate(cut)
					} else {
						stream, _ := stageTree(t)
						_, err := io.Copy(&in, stream)
						require.NoError(t, err)
					}
					s := shell.Send{Root: root, Tmp: tmp, Dst: dst, Detect: detect, Hash: caps.SHA256, PlanIn: &plan}
					if detect {
						s.Carry = &plan // small enough to travel in the script too
					}
					return shRun(t, sh, shell.SendScript(s), &in)
				}
				tmp := filepath.Join(root, shell.TempPrefix+"a-0033")
				out, stderr, status := send(tmp, 0)
				require.Equal(t, 0, status, "send: %s", stderr)
				assert.Empty(t, stderr, "no tool complains (a plan dated now would be in the future for a clock behind the host's)")
				assert.Equal(t, map[string]bool{"x": true}, report(t, out, plan.Want).Hashes, "stderr: %s", stderr)
				assert.Contains(t, out, shell.LinkedLine+"x\n", "x is vouched for by its stamps, whichever way the plan came")
				assert.Equal(t, "carry", readString(t, filepath.Join(tmp, "new", "tree", "x")))
				assert.Equal(t, "content", readString(t, filepath.Join(tmp, "new", "tree", "d", "f")), "the stream follows the plan")
				assert.FileExists(t, filepath.Join(tmp, shell.TarComplete))
				if !caps.Records {
					return
				}
				cut := filepath.Join(root, shell.TempPrefix+"a-0044")
				_, _, status = send(cut, 600) // the header and part of the plan
				assert.Equal(t, 1, status, "a plan cut short ends the command")
				assert.NoFileExists(t, filepath.Join(cut, "new", "tree", "x"), "nothing is carried from part of a plan")
				assert.NoFileExists(t, filepath.Join(cut, shell.TarComplete))
			})
		}
	}
}

// TestMarkerWithoutDD: a sandbox without dd reads a sweep marker's owner
// with head: a live publish's marker beside its copy (between the copy and
// its manifest) is not taken for an orphan copy's record, so the listing
// does not offer that copy to a prune and a sweep leaves the marker.
func TestMarkerWithoutDD(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err, "the test needs procfs")
	bin := t.TempDir()
	for _, dir := range []string{"/usr/bin", "/bin"} {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if e.Name() == "dd" {
				continue
			}
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name())); err != nil && !errors.Is(err, fs.ErrExist) {
				require.NoError(t, err)
			}
		}
	}
	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			path := "PATH=" + bin + "\n"
			if out, _, _ := shRun(t, sh, path+"command -v dd || echo none", nil); strings.TrimSpace(out) != "none" {
				t.Skipf("%s runs its own dd (%q): a sandbox without dd cannot be made", sh[0], strings.TrimSpace(out))
			}
			root := filepath.Join(t.TempDir(), "root")
			dst := publishTree(t, sh, root)
			require.NoError(t, os.Remove(filepath.Join(root, shell.ManifestName("a"))))
			marker := filepath.Join(root, shell.SweepMarkerName("a"))
			require.NoError(t, os.WriteFile(marker, []byte(strconv.Itoa(os.Getpid())+"\n"+ns+"\n"), 0o644))
			out, stderr, status := shRun(t, sh, path+shell.AssetsScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status, "assets: %s", stderr)
			assert.Empty(t, shell.ParseAssetList([]byte(strings.TrimSuffix(out, shell.LeftoversLine+"\n"))), "a live publish's copy is not listed")
			_, stderr, status = shRun(t, sh, path+shell.SweepRootScript(root, shell.Skip{}), nil)
			require.Equal(t, 0, status, "sweep: %s", stderr)
			assert.FileExists(t, marker, "a live publish's marker stays")
			assert.DirExists(t, dst)
		})
	}
}

// TestHeaderWriterAfterLoginNoise: lines a noisy login shell writes before
// the wrapper's header are dropped once the header comes (its pid is
// read); without a header they reach W at End; past the bound everything
// passes and no header is looked for.
func TestHeaderWriterAfterLoginNoise(t *testing.T) {
	var out strings.Builder
	hw := &shell.HeaderWriter{W: &out}
	for _, chunk := range []string{"pyenv: cannot rehash\nrm: cannot remove", " x\nairlock-remote: p", "id 42\nerr\n", "more\n"} {
		n, err := hw.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.NoError(t, hw.End())
	pid, noDir := hw.State()
	assert.Equal(t, 42, pid)
	assert.False(t, noDir)
	assert.Equal(t, "err\nmore\n", out.String())

	out.Reset()
	hw = &shell.HeaderWriter{W: &out}
	_, err := hw.Write([]byte("sh: 1: /bin/sh: not found\n"))
	require.NoError(t, err)
	assert.Empty(t, out.String(), "held while a header may come")
	require.NoError(t, hw.End())
	assert.Equal(t, "sh: 1: /bin/sh: not found\n", out.String())
	_, err = hw.Write([]byte("airlock-remote: pid 7\n"))
	require.NoError(t, err)
	pid, _ = hw.State()
	assert.Zero(t, pid, "no header after End")

	out.Reset()
	hw = &shell.HeaderWriter{W: &out}
	noise := strings.Repeat("noise\n", 12000)
	_, err = hw.Write([]byte(noise))
	require.NoError(t, err)
	_, err = hw.Write([]byte("airlock-remote: pid 9\n"))
	require.NoError(t, err)
	assert.Equal(t, noise+"airlock-remote: pid 9\n", out.String(), "past the bound, everything passes")
	pid, _ = hw.State()
	assert.Zero(t, pid)
}

// TestDetectRecordsNeedsM: the records bit is set only for a tar that
// stops at its archive's end and takes -m (the send command extracts with
// it); a GNU tar that refuses -m is detected as one that does not (the
// stream then goes to a plain `tar -x`, which restores times), and the
// shell's own tar is detected as one that does.
func TestDetectRecordsNeedsM(t *testing.T) {
	real, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar is not installed: the probe cannot be run here")
	}
	probe := func(path string) shell.Caps {
		t.Helper()
		out, stderr, status := shRun(t, []string{"sh"}, "PATH="+shell.Quote(path)+"\n"+shell.DetectScript+shell.EchoHeader, nil)
		require.Equal(t, 0, status, "detect: %s", stderr)
		caps, err := shell.ParseCaps(strings.TrimSpace(strings.TrimPrefix(out, shell.ProbeHeader)))
		require.NoError(t, err, "%q", out)
		return caps
	}
	stock := probe(os.Getenv("PATH"))
	version, err := exec.Command(real, "--version").Output()
	require.NoError(t, err)
	if !bytes.Contains(version, []byte("GNU tar")) {
		t.Skipf("%s is not GNU tar (%q): the stock case is GNU tar's", real, bytes.SplitN(version, []byte("\n"), 2)[0])
	}
	assert.True(t, stock.Records, "GNU tar stops at its archive's end and takes -m")

	bin := t.TempDir()
	wrapper := "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -m ] && { echo 'tar: invalid option -- m' >&2; exit 2; }; done\nexec " + shell.Quote(real) + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "tar"), []byte(wrapper), 0o755))
	noM := probe(bin + ":" + os.Getenv("PATH"))
	assert.False(t, noM.Records, "a tar without -m is not used with it")
	assert.Equal(t, stock.SHA256, noM.SHA256)
	assert.Empty(t, noM.Missing)
}
