package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// dial connects to srv and closes the Host at the end of the test.
func dial(t testing.TB, srv *remotetest.Server, edit ...func(*remote.Config)) *remote.Host {
	t.Helper()
	cfg := srv.Config()
	for _, e := range edit {
		e(&cfg)
	}
	h, err := remote.Dial(t.Context(), srv.Addr(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func writeFiles(t *testing.T, dir string, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		p := filepath.Join(dir, filepath.FromSlash(kv[i]))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(kv[i+1]), 0o644))
	}
}

func TestHostRun(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	var out, errb bytes.Buffer
	err := h.Run(t.Context(), sandbox.Command{
		Script: `printf '%s|' "$A" "$B"; cat; echo oops >&2; exit 3`,
		Env:    map[string]string{"A": "x y 'q' $HOME\nline2", "B": "é"},
		Stdin:  strings.NewReader("in-data"),
		Stdout: &out, Stderr: &errb,
	})
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.Status)
	assert.Equal(t, "x y 'q' $HOME\nline2|é|in-data", out.String())
	assert.Equal(t, "oops\n", errb.String())

	out.Reset()
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "pwd", Dir: srv.Dir(), Stdout: &out}))
	assert.Equal(t, srv.Dir()+"\n", out.String())

	errb.Reset()
	err = h.Run(t.Context(), sandbox.Command{Script: "echo ran", Dir: "/no/such/dir", Stdout: &out, Stderr: &errb})
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "/no/such/dir")
	assert.Empty(t, errb.String(), "the prelude's header line is not the caller's")

	// The header line never reaches the caller's stderr.
	errb.Reset()
	require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "echo e >&2", Stderr: &errb}))
	assert.Equal(t, "e\n", errb.String())

	for _, bad := range []string{"", "1A", "A-B", "A=B", "A B", "Ä"} {
		err := h.Run(t.Context(), sandbox.Command{Script: "true", Env: map[string]string{bad: "v"}})
		require.Error(t, err, "%q", bad)
		assert.Contains(t, err.Error(), "is not a shell name", "%q", bad)
	}
}

func TestHostRunSignal(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	err := h.Run(t.Context(), sandbox.Command{Script: "kill -KILL $$"})
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, -1, ee.Status)
	assert.Equal(t, "KILL", ee.Signal)
}

func TestHostRunCancelIgnoringTERM(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h.Run(ctx, sandbox.Command{Script: "trap '' TERM; sleep 30"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestDialHostKeys(t *testing.T) {
	srv := remotetest.NewServer(t)
	other := remotetest.NewServer(t)

	t.Run("NilCallback", func(t *testing.T) {
		cfg := srv.Config()
		cfg.HostKeyCallback = nil
		_, err := remote.Dial(t.Context(), srv.Addr(), cfg)
		assert.ErrorIs(t, err, remote.ErrNoHostKeyCallback)
	})
	t.Run("FixedMismatch", func(t *testing.T) {
		cb, err := remote.FixedHostKey(string(ssh.MarshalAuthorizedKey(other.HostKey())))
		require.NoError(t, err)
		cfg := srv.Config()
		cfg.HostKeyCallback = cb
		_, err = remote.Dial(t.Context(), srv.Addr(), cfg)
		require.ErrorIs(t, err, remote.ErrHostKeyMismatch)
		var he *remote.HostKeyError
		require.ErrorAs(t, err, &he)
		assert.Equal(t, ssh.FingerprintSHA256(srv.HostKey()), he.Fingerprint)
		assert.Contains(t, err.Error(), srv.Addr())
		assert.Contains(t, err.Error(), ssh.FingerprintSHA256(srv.HostKey()))
	})
	t.Run("FixedMatch", func(t *testing.T) {
		cb, err := remote.FixedHostKey(string(ssh.MarshalAuthorizedKey(srv.HostKey())))
		require.NoError(t, err)
		dial(t, srv, func(c *remote.Config) { c.HostKeyCallback = cb })
	})
	t.Run("FixedBadLine", func(t *testing.T) {
		_, err := remote.FixedHostKey("not a key")
		assert.ErrorContains(t, err, "is not a public key line")
	})
	kh := filepath.Join(t.TempDir(), "known_hosts")
	host, port, err := splitAddr(srv.Addr())
	require.NoError(t, err)
	line := "[" + host + "]:" + port + " " + string(ssh.MarshalAuthorizedKey(srv.HostKey()))
	require.NoError(t, os.WriteFile(kh, []byte(line), 0o600))
	t.Run("KnownHostsMatch", func(t *testing.T) {
		cb, err := remote.KnownHosts(kh)
		require.NoError(t, err)
		dial(t, srv, func(c *remote.Config) { c.HostKeyCallback = cb })
	})
	t.Run("KnownHostsUnknown", func(t *testing.T) {
		cb, err := remote.KnownHosts(kh)
		require.NoError(t, err)
		cfg := other.Config()
		cfg.HostKeyCallback = cb
		_, err = remote.Dial(t.Context(), other.Addr(), cfg)
		require.ErrorIs(t, err, remote.ErrUnknownHost)
		assert.Contains(t, err.Error(), ssh.FingerprintSHA256(other.HostKey()))
		assert.Contains(t, err.Error(), other.Addr())
	})
	t.Run("KnownHostsMismatch", func(t *testing.T) {
		wrong := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(wrong, []byte("["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(other.HostKey()))), 0o600))
		cb, err := remote.KnownHosts(wrong)
		require.NoError(t, err)
		cfg := srv.Config()
		cfg.HostKeyCallback = cb
		_, err = remote.Dial(t.Context(), srv.Addr(), cfg)
		require.ErrorIs(t, err, remote.ErrHostKeyMismatch)
		assert.Contains(t, err.Error(), wrong+":1")
	})
	t.Run("KnownHostsNoFile", func(t *testing.T) {
		_, err := remote.KnownHosts(filepath.Join(t.TempDir(), "missing"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

func splitAddr(a string) (string, string, error) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return "", "", errors.New("no port in " + a)
	}
	return a[:i], a[i+1:], nil
}

// TestHostHangIsTransport: each control operation, when the server never
// answers it, returns ErrTransport within the control deadline, and the
// copy staged before stays as it was: the probe (over SFTP), the first
// publish's setup (which learns the sandbox's tools), the publish itself,
// and the cleanup after a failed transfer.
func TestHostHangIsTransport(t *testing.T) {
	const deadline = 300 * time.Millisecond
	cases := []struct {
		name string
		opt  remotetest.Option
		// failTar makes the sandbox's tar fail on extraction, so that the
		// publish fails and its cleanup runs.
		failTar bool
	}{
		{"Probe", remotetest.WithHangSFTP(), false},
		{"Setup", remotetest.WithHang("mkdir -m 700"), false},
		{"Publish", remotetest.WithHang("transfer incomplete"), false},
		{"Cleanup", remotetest.WithHang(`R "$o" "$d"; then`), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := path.Join(dir, "rt")
			src := t.TempDir()
			writeFiles(t, src, "a", "old")
			good := remotetest.NewServer(t, remotetest.WithDir(dir))
			_, err := stage.Stage(t.Context(), dial(t, good), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)

			if c.failTar {
				bin := t.TempDir()
				writeFiles(t, bin, "tar", "#!/bin/sh\ncase \"$1\" in -x) echo 'tar: no space left on device' >&2; exit 2;; esac\nexec /usr/bin/env -u PATH tar \"$@\"\n")
				require.NoError(t, os.Chmod(filepath.Join(bin, "tar"), 0o755))
				t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			}
			writeFiles(t, src, "a", "new")
			hung := remotetest.NewServer(t, remotetest.WithDir(dir), c.opt)
			h := dial(t, hung, func(c *remote.Config) { c.ControlTimeout = deadline })
			start := time.Now()
			_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
			took := time.Since(start)
			require.ErrorIs(t, err, sandbox.ErrTransport)
			assert.Contains(t, err.Error(), "did not finish within the 300ms control deadline")
			if c.failTar {
				assert.Contains(t, err.Error(), "tar: no space left on device", "the transfer's own failure is kept")
			}
			assert.Less(t, took, 2*time.Second, "within the control deadline (plus the transfer)")
			got, err := os.ReadFile(filepath.Join(root, "x", "a"))
			require.NoError(t, err)
			assert.Equal(t, "old", string(got), "the previous copy must stay")
		})
	}
}

// TestHostDropMidStream cuts the connection while the tree travels: the
// stage fails with ErrTransport, the previous copy stays, and a stage on a
// new connection succeeds and leaves no temporary directory.
func TestHostDropMidStream(t *testing.T) {
	dir := t.TempDir()
	good := remotetest.NewServer(t, remotetest.WithDir(dir))
	root := path.Join(dir, "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "old")
	_, err := stage.Stage(t.Context(), dial(t, good), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), big, 0o644))
	flaky := remotetest.NewServer(t, remotetest.WithDir(dir), remotetest.WithDropAfter(1<<20))
	_, err = stage.Stage(t.Context(), dial(t, flaky), root, []stage.Asset{{Name: "x", Source: src}})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	got, err := os.ReadFile(filepath.Join(root, "x", "a"))
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "the previous copy must stay")

	// The cut transfer left its temporary directory; once its tar has died
	// (it sees the end of its input when the connection goes), the next
	// publish's setup removes it.
	left := tempDirs(t, root)
	require.Len(t, left, 1, "the cut transfer's directory")
	waitOwnerGone(t, filepath.Join(root, left[0]))

	rt, err := stage.Stage(t.Context(), dial(t, good), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	assert.False(t, rt.Assets[0].Reused)
	got, err = os.ReadFile(filepath.Join(root, "x", "a"))
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Empty(t, tempDirs(t, root), "no temporary directory is left")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{".airlock-manifest-x.json", ".airlock-stamps-x", "x"}, names)
}

// tempDirs lists the temporary directories under root.
func tempDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var tmp []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".airlock-tmp-") || strings.HasPrefix(e.Name(), ".airlock-gone-") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

// waitOwnerGone waits until the process named in dir's owner file has
// ended (the sweep removes only a dead transfer's directory).
func waitOwnerGone(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	require.NoError(t, err, "a started transfer records its tar's pid")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])) // the pid; then its PID namespace
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut transfer's tar (pid %d) still runs after 10 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostRoundTrips: staging the standard 2,000-file tree under +2 ms RTT
// costs a fixed number of exec requests, not one per file.
func TestHostRoundTrips(t *testing.T) {
	srv := remotetest.NewServer(t, remotetest.WithLatency(2*time.Millisecond))
	counts := map[int]int64{}
	for _, files := range []int{100, 2000} {
		h := dial(t, srv) // a new connection: its first probe learns the sandbox's tools
		src := t.TempDir()
		_, err := treegen.Write(src, treegen.Shape{Dirs: files / 100, Files: 100, MinBytes: 64, MaxBytes: 256, Seed: 2})
		require.NoError(t, err)
		before := srv.Execs()
		start := time.Now()
		_, err = stage.Stage(t.Context(), h, path.Join(srv.Dir(), "rt", strings.Repeat("n", files%7+1)), []stage.Asset{{Name: "x", Source: src}})
		require.NoError(t, err)
		counts[files] = srv.Execs() - before
		t.Logf("%d files: %d exec requests, %s", files, counts[files], time.Since(start))
	}
	assert.Equal(t, counts[100], counts[2000], "exec requests must not grow with the file count")
	assert.LessOrEqual(t, counts[2000], int64(2), "the send command (setup, which learns the sandbox's tools, and the transfer) and the publish; the probe reads over SFTP")
}

// TestHostDelta: one changed file of 2,000 is the only one sent; a file of
// the old copy tampered with in the sandbox is sent again, not carried.
func TestHostDelta(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	src := t.TempDir()
	_, err := treegen.Write(src, treegen.Shape{Dirs: 20, Files: 100, MinBytes: 64, MaxBytes: 512, Seed: 3})
	require.NoError(t, err)
	root := path.Join(srv.Dir(), "rt")
	first, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	files := first.Assets[0].Files
	require.Equal(t, files, first.Assets[0].Sent)

	changed := firstFile(t, src)
	require.NoError(t, os.WriteFile(changed, []byte("changed"), 0o644))
	rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
	require.NoError(t, err)
	assert.Equal(t, 1, rt.Assets[0].Sent)
	assert.Equal(t, files, rt.Assets[0].Files)
	assertSameTree(t, src, filepath.Join(root, "x"))

	// Tamper with an unchanged file in the sandbox, change another source file.
	rel, err := filepath.Rel(src, changed)
	require.NoError(t, err)
	victim := filepath.Join(root, "x", rel)
	require.NoError(t, os.WriteFile(victim, []byte("tampered"), 0o644))
	other := lastFile(t, src)
	require.NoError(t, os.WriteFile(other, []byte("changed too"), 0o644))
	rt, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
	require.NoError(t, err)
	assert.Equal(t, 2, rt.Assets[0].Sent, "the tampered file is re-sent with the changed one")
	assertSameTree(t, src, filepath.Join(root, "x"))
}

func firstFile(t *testing.T, dir string) string { return pickFile(t, dir, false) }
func lastFile(t *testing.T, dir string) string  { return pickFile(t, dir, true) }

func pickFile(t *testing.T, dir string, last bool) string {
	t.Helper()
	var got string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && (got == "" || last) {
			got = p
		}
		return nil
	}))
	require.NotEmpty(t, got)
	return got
}

func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	read := func(root string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			switch {
			case d.IsDir():
				m[rel] = "dir"
			case d.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				m[rel] = string(b)
			default:
				m[rel] = "other:" + d.Type().String()
			}
			return nil
		}))
		return m
	}
	assert.Equal(t, read(want), read(got))
}

func TestHostUnstageAndPrune(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	root := path.Join(srv.Dir(), "rt")
	a, b := t.TempDir(), t.TempDir()
	writeFiles(t, a, "f", "a")
	writeFiles(t, b, "f", "b")
	_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "a", Source: a}, {Name: "b", Source: b}})
	require.NoError(t, err)
	require.NoError(t, stage.Unstage(t.Context(), h, root, "a"))
	assert.NoDirExists(t, filepath.Join(root, "a"))
	assert.NoFileExists(t, filepath.Join(root, ".airlock-manifest-a.json"))
	_, err = stage.Stage(t.Context(), h, root, nil, stage.WithPrune())
	require.NoError(t, err)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestHostProbeOverSFTP: after the first probe, manifests are read over
// SFTP; a manifest the sandbox replaced by a link is no manifest, so the
// asset is published again.
func TestHostProbeOverSFTP(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	root := path.Join(srv.Dir(), "rt")
	src := t.TempDir()
	writeFiles(t, src, "f", "x")
	_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "a", Source: src}})
	require.NoError(t, err)
	before := srv.Execs()
	got, err := h.Probe(t.Context(), root, []string{"a", "missing"})
	require.NoError(t, err)
	assert.Equal(t, before, srv.Execs(), "the probe ran no command")
	require.NotNil(t, got[0])
	assert.Nil(t, got[1])

	m := filepath.Join(root, ".airlock-manifest-a.json")
	require.NoError(t, os.Rename(m, m+".real"))
	require.NoError(t, os.Symlink(m+".real", m))
	got, err = h.Probe(t.Context(), root, []string{"a"})
	require.NoError(t, err)
	assert.Nil(t, got[0], "a link is not a manifest")
	rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "a", Source: src}})
	require.NoError(t, err)
	assert.False(t, rt.Assets[0].Reused)
}

// TestHostFetchOverSFTP: a small copy is read back over SFTP (no process in
// the sandbox), a larger one as one tar stream; both yield the same
// entries. A server whose SFTP never answers makes Fetch fail with
// ErrTransport within the control deadline.
func TestHostFetchOverSFTP(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	root := path.Join(srv.Dir(), "rt")
	for _, files := range []int{10, 200} {
		src := t.TempDir()
		for i := range files {
			writeFiles(t, src, fmt.Sprintf("d%d/f%03d", i%3, i), strings.Repeat("x", i))
		}
		name := fmt.Sprint("x", files)
		_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: name, Source: src}})
		require.NoError(t, err)
		before := srv.Execs()
		rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: name, Source: src}}, stage.WithVerify())
		require.NoError(t, err)
		assert.True(t, rt.Assets[0].Reused, "the verified copy is reused")
		want := int64(0)
		if files > 64 {
			want = 1
		}
		assert.Equal(t, want, srv.Execs()-before, "%d files: exec sessions of a verified re-stage", files)
	}

	hung := remotetest.NewServer(t, remotetest.WithDir(srv.Dir()), remotetest.WithHangSFTP())
	hh := dial(t, hung, func(c *remote.Config) { c.ControlTimeout = 300 * time.Millisecond })
	start := time.Now()
	err := hh.Fetch(t.Context(), root, "x10", func(stage.Entry, io.Reader) error { return nil })
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.Contains(t, err.Error(), "starting SFTP did not finish within the 300ms control deadline")
	assert.Less(t, time.Since(start), 2*time.Second)
}
