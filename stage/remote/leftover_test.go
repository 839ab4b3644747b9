package remote_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// Issue 18, defects 7, 8 and 13 (first half) over SSH: the leftovers of a
// host killed between the transfer and the publish, and those of zombie
// owners, are swept by the next stage or unstage; deleting the old copy is
// outside the control step; a linked root is refused.

func leftovers(t testing.TB, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, ".airlock-tmp-") || strings.HasPrefix(n, ".airlock-gone-") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// sshServer is a server of either kind, with what a helper process needs
// to dial it (spec) and a way to dial it here.
type sshServer struct {
	dir  string
	spec string // "addr|user|keyfile|hostkey"; "" for remotetest (the helper starts its own)
	dial func(t *testing.T) *remote.Host
}

func servers(t *testing.T) map[string]func(t *testing.T) sshServer {
	return map[string]func(t *testing.T) sshServer{
		"remotetest": func(t *testing.T) sshServer {
			dir := t.TempDir()
			return sshServer{dir: dir, dial: func(t *testing.T) *remote.Host {
				return dial(t, remotetest.NewServer(t, remotetest.WithDir(dir)))
			}}
		},
		"sshd": func(t *testing.T) sshServer {
			srv := sshdtest.Start(t)
			return sshServer{
				dir:  srv.Dir(),
				spec: strings.Join([]string{srv.Addr(), srv.User(), srv.KeyFile(), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.HostKey())))}, "|"),
				dial: func(t *testing.T) *remote.Host {
					h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
					require.NoError(t, err)
					t.Cleanup(func() { _ = h.Close() })
					return h
				},
			}
		},
	}
}

const hostKillEnv = "AIRLOCK_TEST_HOST_KILL_HELPER"

// killAtPublish passes commands on, and SIGKILLs this process when the
// publish comes: the host dies between the transfer and the publish. The
// publish is a command of its own, or (a sandbox with GNU tar) the send
// command's, after it reports the stream extracted.
type killAtPublish struct{ r sandbox.Runner }

func (k killAtPublish) Run(ctx context.Context, cmd sandbox.Command) error {
	kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	switch {
	case strings.Contains(cmd.Script, shell.PublishLine):
		cmd.Stdout = killAtLine{w: cmd.Stdout, line: shell.ExtractedLine + "\n", kill: kill}
	case strings.Contains(cmd.Script, "transfer incomplete"):
		kill()
	}
	return k.r.Run(ctx, cmd)
}

// killAtLine passes writes on until one holds line: then it calls kill.
type killAtLine struct {
	w    io.Writer
	line string
	kill func()
}

func (k killAtLine) Write(p []byte) (int, error) {
	if strings.Contains(string(p), k.line) {
		k.kill()
	}
	return k.w.Write(p)
}

// TestHostKillHelper is the body of the helper process of
// TestHostSweepAfterKilledHost (a no-op in a normal run).
func TestHostKillHelper(t *testing.T) {
	v := os.Getenv(hostKillEnv)
	if v == "" {
		return
	}
	dir, rest, _ := strings.Cut(v, "\n")
	src, spec, _ := strings.Cut(rest, "\n")
	var h *remote.Host
	if spec == "" {
		h = dial(t, remotetest.NewServer(t, remotetest.WithDir(dir)))
	} else {
		f := strings.SplitN(spec, "|", 4)
		key, err := os.ReadFile(f[2])
		require.NoError(t, err)
		signer, err := ssh.ParsePrivateKey(key)
		require.NoError(t, err)
		cb, err := remote.FixedHostKey(f[3])
		require.NoError(t, err)
		h, err = remote.Dial(t.Context(), f[0], remote.Config{User: f[1], Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: cb})
		require.NoError(t, err)
	}
	_, err := stage.Stage(context.Background(), stage.NewBridge(killAtPublish{h}), filepath.Join(dir, "rt"), []stage.Asset{{Name: "x", Source: src}})
	t.Fatalf("the helper was not killed: %v", err)
}

// TestHostSweepAfterKilledHost: a host SIGKILLed between the transfer and
// the publish leaves a complete temporary directory in the sandbox; the
// next Stage, or the next Unstage, on a new connection removes it, and the
// previous copy stayed in place.
func TestHostSweepAfterKilledHost(t *testing.T) {
	for kind, mk := range servers(t) {
		for _, next := range []string{"Stage", "Unstage"} {
			t.Run(kind+"/"+next, func(t *testing.T) {
				srv := mk(t)
				src := t.TempDir()
				root := filepath.Join(srv.dir, "rt")
				h := srv.dial(t)
				writeFiles(t, src, "a", "old", "b", "old")
				_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}})
				require.NoError(t, err)
				writeFiles(t, src, "a", "new", "b", "new")

				c := exec.Command(os.Args[0], "-test.run=^TestHostKillHelper$", "-test.count=1")
				c.Env = append(os.Environ(), hostKillEnv+"="+srv.dir+"\n"+src+"\n"+srv.spec)
				out, err := c.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws, ok := ee.Sys().(syscall.WaitStatus)
				require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the helper must die by SIGKILL: %v\n%s", err, out)

				left := leftovers(t, root)
				require.Len(t, left, 1, "the killed host leaves its temporary directory")
				_, err = os.Stat(filepath.Join(root, left[0], "complete"))
				require.NoError(t, err, "killed between the transfer and the publish: the transfer is complete")
				b, err := os.ReadFile(filepath.Join(root, "x", "a"))
				require.NoError(t, err)
				assert.Equal(t, "old", string(b), "the previous copy stays")

				if next == "Stage" {
					_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
					require.NoError(t, err)
					b, err := os.ReadFile(filepath.Join(root, "x", "a"))
					require.NoError(t, err)
					assert.Equal(t, "new", string(b))
				} else {
					require.NoError(t, stage.Unstage(t.Context(), h, root, "y"))
				}
				assert.Empty(t, leftovers(t, root), "the next %s removes what the killed host left", next)
			})
		}
	}
}

// TestHostSweepZombieOwner: over SSH too (the servers run on this machine,
// so their processes are this test's), a leftover owned by a zombie is
// swept and one owned by a live process stays.
func TestHostSweepZombieOwner(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs procfs to make and recognise a zombie: " + err.Error())
	}
	for kind, mk := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			srv := mk(t)
			testSweepZombieOwner(t, srv.dial(t), filepath.Join(srv.dir, "rt"))
		})
	}
}

func testSweepZombieOwner(t *testing.T, h *remote.Host, root string) {
	src := t.TempDir()
	writeFiles(t, src, "a", "1")
	_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)

	c := exec.Command("sh", "-c", `sleep 1 & echo $!; exec sleep 60`)
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	z, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", z))
		return err == nil && strings.HasPrefix(strings.TrimLeft(string(b[strings.LastIndexByte(string(b), ')')+1:]), " "), "Z")
	}, 30*time.Second, 10*time.Millisecond)

	for name, pid := range map[string]int{".airlock-tmp-x-zombie": z, ".airlock-tmp-x-live": c.Process.Pid} {
		writeFiles(t, filepath.Join(root, name), "new/tree/f", name, "complete", "", "owner", strconv.Itoa(pid)+"\n")
	}
	writeFiles(t, src, "a", "2")
	_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	assert.Equal(t, []string{".airlock-tmp-x-live"}, leftovers(t, root))
}

// slowRm runs every command with an rm that sleeps before removing
// anything; the PATH travels in Command.Env, through the Host's prelude.
type slowRm struct {
	r   sandbox.Runner
	bin string
}

func (s slowRm) Run(ctx context.Context, cmd sandbox.Command) error {
	env := map[string]string{"PATH": s.bin + ":" + os.Getenv("PATH")}
	for k, v := range cmd.Env {
		env[k] = v
	}
	cmd.Env = env
	return s.r.Run(ctx, cmd)
}

// TestHostSlowRm: with an rm three times slower than the control deadline,
// a re-stage and an unstage over SSH succeed, and the old copies are
// deleted, at the latest by the next stage.
// (remotetest only: a real sshd's session setup alone can take longer
// than the short control deadline this test needs under load.)
func TestHostSlowRm(t *testing.T) {
	srv := remotetest.NewServer(t)
	testSlowRm(t, dial(t, srv), srv.Dir())
}

func testSlowRm(t *testing.T, h *remote.Host, dir string) {
	bin := t.TempDir()
	real, err := exec.LookPath("rm")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "rm"), []byte("#!/bin/sh\nsleep 1.5\nexec "+real+" \"$@\"\n"), 0o755))
	b := stage.NewBridge(slowRm{h, bin}, stage.WithControlTimeout(500*time.Millisecond))
	root := filepath.Join(dir, "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "v1")
	assets := []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: src}}
	_, err = stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	writeFiles(t, src, "a", "v2")
	_, err = stage.Stage(t.Context(), b, root, assets)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "x", "a"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got))
	require.NoError(t, stage.Unstage(t.Context(), b, root, "y"))
	writeFiles(t, src, "a", "v3")
	_, err = stage.Stage(t.Context(), b, root, assets[:1])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(leftovers(t, root)) == 0 }, time.Minute, 50*time.Millisecond)
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{".airlock-manifest-x.json", ".airlock-stamps-x", "x"}, names)
}

// TestHostRefusesLinkedRoot: Assets and Unstage over SSH refuse a stage
// root that is a link to a directory outside, which stays untouched.
func TestHostRefusesLinkedRoot(t *testing.T) {
	for kind, mk := range servers(t) {
		t.Run(kind, func(t *testing.T) {
			srv := mk(t)
			h := srv.dial(t)
			outside := filepath.Join(srv.dir, "outside")
			writeFiles(t, outside, ".airlock-manifest-x.json", "{}", "x/f", "keep")
			root := filepath.Join(srv.dir, "rt")
			require.NoError(t, os.Symlink(outside, root))
			_, err := h.Assets(t.Context(), root)
			assert.ErrorContains(t, err, "is a symbolic link; refusing to follow it")
			err = stage.Unstage(t.Context(), h, root, "x")
			assert.ErrorContains(t, err, "is a symbolic link; refusing to follow it")
			var ee *sandbox.ExitError
			assert.True(t, errors.As(err, &ee), "%v", err)
			b, err := os.ReadFile(filepath.Join(outside, "x", "f"))
			require.NoError(t, err)
			assert.Equal(t, "keep", string(b))
			_, err = os.Stat(filepath.Join(outside, ".airlock-manifest-x.json"))
			assert.NoError(t, err)
		})
	}
}

// killInScript passes commands on with at (a line of a script) replaced
// by a SIGKILL of the command's shell, and counts the replacements.
type killInScript struct {
	r      sandbox.Runner
	at     string
	killed *int
}

func (k killInScript) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, k.at) {
		cmd.Script = strings.Replace(cmd.Script, k.at, "kill -9 $$;", 1)
		*k.killed++
	}
	return k.r.Run(ctx, cmd)
}

// TestHostSweepsKilledPublish: a publish killed in the sandbox after its
// renames, while it records the stamps, leaves its stamps directory (a
// dead shell's) and its sweep marker. The retry finds the new copy in
// place and publishes nothing; its probe over SFTP, which runs no shell,
// finds the marker and has the root swept: one command, and nothing is
// left. The next unchanged stage runs no command at all.
func TestHostSweepsKilledPublish(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	root := filepath.Join(srv.Dir(), "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "one", "d/b", "two")
	assets := []stage.Asset{{Name: "x", Source: src}}
	killed := 0
	_, err := stage.Stage(t.Context(), stage.NewBridge(killInScript{r: h, at: `rm -f "$s.new"`, killed: &killed}), root, assets)
	require.NoError(t, err, "the copy was in place before the kill")
	require.Equal(t, 1, killed, "the publish was killed while recording the stamps")
	left := leftovers(t, root)
	require.Len(t, left, 1, "the killed publish leaves its stamps directory")
	assert.True(t, strings.HasSuffix(left[0], "-stamps"), "%s", left[0])
	marker := filepath.Join(root, shell.SweepMarkerName("x"))
	assert.FileExists(t, marker, "and its sweep marker")

	before := srv.Execs()
	rt, err := stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	assert.True(t, rt.Assets[0].Reused, "the retry has nothing to publish")
	assert.Equal(t, before+1, srv.Execs(), "the retry runs one command: the sweep")
	assert.Empty(t, leftovers(t, root), "the retry removes what the killed publish left")
	assert.NoFileExists(t, marker)

	before = srv.Execs()
	rt, err = stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	assert.True(t, rt.Assets[0].Reused)
	assert.Equal(t, before, srv.Execs(), "an unchanged stage runs no command")
	b, err := os.ReadFile(filepath.Join(root, "x", "d", "b"))
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))
}

// TestHostPlantedSweepMarkers: what a hostile sandbox plants at an asset's
// sweep marker over SFTP. A directory, a fifo or a link is no marker (the
// probe reads regular files only): an unchanged stage runs no command and
// never hangs. A huge or unreadable file is one: that stage runs one
// sweep, which deletes it, and the next runs none again. A marker naming
// a live process (PID 1) stays: it costs the sandbox one sweep per stage.
func TestHostPlantedSweepMarkers(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	root := filepath.Join(srv.Dir(), "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "one")
	assets := []stage.Asset{{Name: "x", Source: src}}
	_, err := stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	marker := filepath.Join(root, shell.SweepMarkerName("x"))
	for _, c := range []struct {
		name   string
		plant  func() error
		sweeps [2]int64 // commands the first and the second stage run
	}{
		{"dir", func() error { return os.MkdirAll(filepath.Join(marker, "d"), 0o755) }, [2]int64{0, 0}},
		{"fifo", func() error { return syscall.Mkfifo(marker, 0o644) }, [2]int64{0, 0}},
		{"link", func() error { return os.Symlink("/dev/zero", marker) }, [2]int64{0, 0}},
		{"huge", func() error { return os.WriteFile(marker, make([]byte, 1<<20), 0o644) }, [2]int64{1, 0}},
		{"unreadable", func() error { return os.WriteFile(marker, []byte("x\n"), 0) }, [2]int64{1, 0}},
		{"live", func() error { return os.WriteFile(marker, []byte("1\n"), 0o644) }, [2]int64{1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(marker))
			require.NoError(t, c.plant())
			for i, want := range c.sweeps {
				before := srv.Execs()
				rt, err := stage.Stage(t.Context(), h, root, assets)
				require.NoError(t, err)
				assert.True(t, rt.Assets[0].Reused)
				assert.Equal(t, want, srv.Execs()-before, "stage %d over a planted %s", i+1, c.name)
			}
			if c.sweeps[1] == 0 && c.sweeps[0] > 0 {
				assert.NoFileExists(t, marker, "the sweep deletes the planted %s", c.name)
			}
		})
	}
	require.NoError(t, os.RemoveAll(marker))
}

// TestHostOrphanCopy: a removal killed in the sandbox between moving an
// asset's manifest away and moving its copy, or a publish killed between
// putting its new copy in place and its manifest (its cleanup run or
// killed too), leaves a whole copy without a manifest. Listed by manifests
// alone, it would be no staged asset, and no prune would ever remove it:
// the skill a user deselected would stay in the agent's view for good.
// The asset's sweep marker stays beside it as its record: the asset
// listing names it, so a prune removes it, and a stage of it sends it
// whole; either leaves nothing behind.
func TestHostOrphanCopy(t *testing.T) {
	unstage := func(ctx context.Context, tgt stage.Target, root, _ string) error {
		return stage.Unstage(ctx, tgt, root, "x")
	}
	restage := func(ctx context.Context, tgt stage.Target, root, src string) error {
		writeFiles(t, src, "a", "changed")
		_, err := stage.Stage(ctx, tgt, root, []stage.Asset{{Name: "x", Source: src}})
		return err
	}
	const (
		removeCopy  = `mv -f './x' "$t/" || exit 4`
		putManifest = `mv -f "$t/new/manifest.json" "$m" || exit 5`
		cleanup     = `R "$o" "$d"; then`
	)
	for _, c := range []struct {
		name string
		at   []string // the lines killed
		op   func(ctx context.Context, tgt stage.Target, root, src string) error
	}{
		{"removal", []string{removeCopy}, unstage},
		{"publish", []string{putManifest}, restage},
		{"publish and its cleanup", []string{putManifest, cleanup}, restage},
	} {
		for _, next := range []string{"prune", "stage"} {
			t.Run(c.name+"/"+next, func(t *testing.T) {
				srv := remotetest.NewServer(t)
				h := dial(t, srv)
				root := filepath.Join(srv.Dir(), "rt")
				src, other := t.TempDir(), t.TempDir()
				writeFiles(t, src, "a", "one", "d/b", "two")
				writeFiles(t, other, "y", "kept")
				_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}, {Name: "y", Source: other}})
				require.NoError(t, err)

				killed := 0
				var r sandbox.Runner = h
				for _, at := range c.at {
					r = killInScript{r: r, at: at, killed: &killed}
				}
				err = c.op(t.Context(), stage.NewBridge(r), root, src)
				require.Error(t, err, "the command was killed before its end")
				require.Equal(t, len(c.at), killed)
				assert.NoFileExists(t, filepath.Join(root, shell.ManifestName("x")), "no manifest")
				assert.DirExists(t, filepath.Join(root, "x"), "the killed command left the copy")
				assert.FileExists(t, filepath.Join(root, shell.SweepMarkerName("x")), "and its sweep marker")
				names, err := h.Assets(t.Context(), root)
				require.NoError(t, err)
				assert.Equal(t, []string{"x", "y"}, names, "the listing names the orphan copy")

				if next == "prune" {
					_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "y", Source: other}}, stage.WithPrune())
					require.NoError(t, err)
					assert.NoDirExists(t, filepath.Join(root, "x"), "the deselected asset is gone")
					names, err := h.Assets(t.Context(), root)
					require.NoError(t, err)
					assert.Equal(t, []string{"y"}, names)
				} else {
					rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
					require.NoError(t, err)
					assert.False(t, rt.Assets[0].Reused, "a copy without its manifest is sent again")
					assert.Empty(t, treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, filepath.Join(root, "x"))))
					_, err = os.Stat(filepath.Join(root, shell.ManifestName("x")))
					require.NoError(t, err)
				}
				assert.Empty(t, leftovers(t, root))
				assert.NoFileExists(t, filepath.Join(root, shell.SweepMarkerName("x")))
			})
		}
	}
}
