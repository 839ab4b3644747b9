package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// hostShell lets the suite act as the hostile sandbox through the Host's
// own runner.
var hostShell = stagetest.WithSandboxShell(func(t *testing.T, tg stage.Target) (sandbox.Runner, string) {
	return tg.(*remote.Host), ""
})

func TestHostConformanceRemotetest(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		srv := remotetest.NewServer(t)
		return dial(t, srv), path.Join(srv.Dir(), "rt")
	}, hostShell)
}

// readerOnly is a Runner and sandbox.FileReader over SFTP that is no
// sandbox.FileStater: what a Bridge over such a runner probes with (the
// manifest's first file looked up, tree.FirstFile).
type readerOnly struct{ h *remote.Host }

func (r readerOnly) Run(ctx context.Context, cmd sandbox.Command) error { return r.h.Run(ctx, cmd) }
func (r readerOnly) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	return r.h.ReadFile(ctx, p, max)
}

// TestBridgeConformanceReaderOnly: a Bridge over a runner that reads files
// over SFTP but cannot look a path up passes the suite too (a copy deleted
// in the sandbox is found by its first file).
func TestBridgeConformanceReaderOnly(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		srv := remotetest.NewServer(t)
		return stage.NewBridge(readerOnly{dial(t, srv)}), path.Join(srv.Dir(), "rt")
	}, stagetest.WithSandboxShell(func(t *testing.T, tg stage.Target) (sandbox.Runner, string) {
		return sandbox.Local("/"), ""
	}))
}

func TestHostRunnerConformanceRemotetest(t *testing.T) {
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner {
		return dial(t, remotetest.NewServer(t))
	})
}

func TestHostRunnerConformanceSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner {
		h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		return h
	})
}

func TestHostConformanceSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		dir, err := os.MkdirTemp(srv.Dir(), "case-")
		require.NoError(t, err)
		return h, path.Join(dir, "rt")
	}, hostShell)
}

// TestHostSSHDEnvNotInArgv runs a command holding a secret env value on a
// real sshd while every process's /proc/*/cmdline is scanned: the secret
// never appears there, and the command sees it.
func TestHostSSHDEnvNotInArgv(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	defer h.Close()
	secret := "s3cr3t-" + strings.Repeat("z", 12) + "-value"

	stop := make(chan struct{})
	found := make(chan string, 1)
	scans := 0
	go func() {
		defer close(found)
		for {
			select {
			case <-stop:
				return
			default:
			}
			scans++
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				b, err := os.ReadFile(p)
				if err == nil && bytes.Contains(b, []byte(secret)) {
					found <- p + ": " + string(bytes.ReplaceAll(b, []byte{0}, []byte(" ")))
					return
				}
			}
		}
	}()
	var out bytes.Buffer
	err = h.Run(t.Context(), sandbox.Command{Script: `sleep 1; printf %s "$SECRET"`, Env: map[string]string{"SECRET": secret}, Stdout: &out})
	close(stop)
	leak := <-found
	require.NoError(t, err)
	assert.Equal(t, secret, out.String(), "the command sees the value")
	assert.Empty(t, leak, "the secret appeared in a command line")
	assert.Greater(t, scans, 1)
}

// TestHostSSHDDelta: delta publish and a cancelled command over real
// OpenSSH.
func TestHostSSHDDelta(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	defer h.Close()
	src := t.TempDir()
	writeFiles(t, src, "a", "1", "d/b", "2", "d/c", "3")
	root := path.Join(srv.Dir(), "rt")
	_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	writeFiles(t, src, "d/b", "changed")
	rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
	require.NoError(t, err)
	assert.Equal(t, 1, rt.Assets[0].Sent)
	assertSameTree(t, src, filepath.Join(root, "x"))

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = h.Run(ctx, sandbox.Command{Script: "trap '' TERM; sleep 30"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second)
}

// TestHostSSHDDeltaLongCarry: a carry list as long as may travel inside the
// send command, of names that need quoting (which remote.Host's own quoting
// multiplies), still fits what OpenSSH and the kernel accept for one
// command, and only the changed file travels.
func TestHostSSHDDeltaLongCarry(t *testing.T) {
	srv := sshdtest.Start(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	defer h.Close()
	src := t.TempDir()
	var kv []string
	for i := range 3300 { // about 62 KiB of quoted names: just inside maxEmbeddedCarry
		kv = append(kv, fmt.Sprintf("d%02d/it's %04d", i%40, i), "x")
	}
	writeFiles(t, src, kv...)
	root := path.Join(srv.Dir(), "rt")
	_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	writeFiles(t, src, "d00/it's 0000", "changed")
	rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	assert.Equal(t, 1, rt.Assets[0].Sent)
	assertSameTree(t, src, filepath.Join(root, "x"))
}

// TestCopyReplacedByLinkIsPublishedAgain: the sandbox moves a published
// copy (or the whole stage root) aside and puts a link to it in its place.
// Every Target that can tell a link from a directory (a Host, which looks
// the paths up over SFTP; a Bridge, whose shell probe checks; a Dir)
// publishes the asset again, without WithVerify, and the link is replaced
// by a directory.
func TestCopyReplacedByLinkIsPublishedAgain(t *testing.T) {
	for _, moved := range []string{"the copy", "the root"} {
		srv := remotetest.NewServer(t)
		local := t.TempDir()
		dir, err := stage.NewDir(local)
		require.NoError(t, err)
		for _, c := range []struct {
			name         string
			target       stage.Target
			root, onHost string
		}{
			{"Host", dial(t, srv), path.Join(srv.Dir(), "rt"), filepath.Join(srv.Dir(), "rt")},
			{"Bridge", stage.NewBridge(sandbox.Local("/")), path.Join(local, "brt"), filepath.Join(local, "brt")},
			{"Dir", dir, "/drt", filepath.Join(local, "drt")},
		} {
			t.Run(moved+"/"+c.name, func(t *testing.T) {
				src := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("# s\n"), 0o644))
				assets := []stage.Asset{{Name: "skills", Source: src}}
				ix, err := stage.OpenIndex(t.TempDir())
				require.NoError(t, err)
				_, err = stage.Stage(t.Context(), c.target, c.root, assets, stage.WithIndex(ix))
				require.NoError(t, err)
				at := filepath.Join(c.onHost, "skills")
				if moved == "the root" {
					at = c.onHost
				}
				require.NoError(t, os.Rename(at, at+".moved"))
				require.NoError(t, os.Symlink(filepath.Base(at)+".moved", at))
				rt, err := stage.Stage(t.Context(), c.target, c.root, assets, stage.WithIndex(ix))
				require.NoError(t, err)
				assert.False(t, rt.Assets[0].Reused, "a link in the place of %s was taken for the copy", moved)
				fi, err := os.Lstat(at)
				require.NoError(t, err)
				assert.True(t, fi.IsDir(), "%s is a directory again: %v", at, fi.Mode())
				got, err := os.ReadFile(filepath.Join(c.onHost, "skills", "SKILL.md"))
				require.NoError(t, err)
				assert.Equal(t, "# s\n", string(got))
			})
		}
	}
}

// deniedManifests is a Host whose manifest reads are refused, as SFTP
// refuses a manifest the sandbox made unreadable (chmod 000) to a user
// other than root.
type deniedManifests struct{ *remote.Host }

func (d deniedManifests) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	if strings.HasPrefix(path.Base(p), ".airlock-manifest-") {
		return nil, fmt.Errorf("%w: remote: open %s: %w", sandbox.ErrTransport, p, os.ErrPermission)
	}
	return d.Host.ReadFile(ctx, p, max)
}

// TestUnreadableManifestIsPublishedAgain: a manifest the Bridge may not
// read is no manifest: the asset is published again (the publish moves
// it aside), where a transport failure would have failed every stage.
func TestUnreadableManifestIsPublishedAgain(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("# s\n"), 0o644))
	assets := []stage.Asset{{Name: "skills", Source: src}}
	root := path.Join(srv.Dir(), "rt")
	_, err := stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	rt, err := stage.Stage(t.Context(), stage.NewBridge(deniedManifests{h}), root, assets)
	require.NoError(t, err)
	assert.False(t, rt.Assets[0].Reused)
	got, err := os.ReadFile(filepath.Join(srv.Dir(), "rt", "skills", "SKILL.md"))
	require.NoError(t, err)
	assert.Equal(t, "# s\n", string(got))
}

// doubtful is a Runner over a Host whose lookups answer through the given
// functions: ReadFile (as a sandbox.FileReader), and Lstat when lstat is
// set (as a sandbox.FileStater, through statDoubtful).
type doubtful struct {
	h        *remote.Host
	readFile func(p string, max int64) ([]byte, error) // nil: the Host's
}

func (d doubtful) Run(ctx context.Context, cmd sandbox.Command) error { return d.h.Run(ctx, cmd) }
func (d doubtful) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	if d.readFile != nil {
		return d.readFile(p, max)
	}
	return d.h.ReadFile(ctx, p, max)
}

type statDoubtful struct {
	doubtful
	lstat func(p string) (fs.FileInfo, error)
}

func (d statDoubtful) Lstat(ctx context.Context, p string) (fs.FileInfo, error) { return d.lstat(p) }

// TestProbeInDoubtPublishesAgain: a copy the probe cannot vouch for is
// published again, never reported Reused: a lookup that fails, a
// FileStater that answers nothing (nil, nil), a first-file lookup that
// fails otherwise than "missing", an asset without regular files on a
// runner that only reads files (nothing to look up). Each case deletes
// the copy first, so a Reused stage would report staged what is not there.
func TestProbeInDoubtPublishesAgain(t *testing.T) {
	plainErr := errors.New("the server refused the lookup")
	for _, c := range []struct {
		name   string
		empty  bool // the asset holds no regular file
		runner func(h *remote.Host) sandbox.Runner
	}{
		{"Lstat fails on the transport", false, func(h *remote.Host) sandbox.Runner {
			return statDoubtful{doubtful{h: h}, func(p string) (fs.FileInfo, error) {
				return nil, fmt.Errorf("%w: lstat %s: connection reset", sandbox.ErrTransport, p)
			}}
		}},
		{"Lstat fails otherwise", false, func(h *remote.Host) sandbox.Runner {
			return statDoubtful{doubtful{h: h}, func(string) (fs.FileInfo, error) { return nil, plainErr }}
		}},
		{"Lstat answers nothing", false, func(h *remote.Host) sandbox.Runner {
			return statDoubtful{doubtful{h: h}, func(string) (fs.FileInfo, error) { return nil, nil }}
		}},
		{"first-file lookup fails otherwise", false, func(h *remote.Host) sandbox.Runner {
			return doubtful{h: h, readFile: func(p string, max int64) ([]byte, error) {
				if max == 0 {
					return nil, plainErr
				}
				return h.ReadFile(context.Background(), p, max)
			}}
		}},
		{"no regular file, a runner that only reads files", true, func(h *remote.Host) sandbox.Runner { return doubtful{h: h} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := remotetest.NewServer(t)
			h := dial(t, srv)
			src := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(src, "d", "e"), 0o755))
			if !c.empty {
				require.NoError(t, os.WriteFile(filepath.Join(src, "d", "SKILL.md"), []byte("# s\n"), 0o644))
			}
			assets := []stage.Asset{{Name: "skills", Source: src}}
			root := path.Join(srv.Dir(), "rt")
			ix, err := stage.OpenIndex(t.TempDir())
			require.NoError(t, err)
			_, err = stage.Stage(t.Context(), h, root, assets, stage.WithIndex(ix))
			require.NoError(t, err)
			copyDir := filepath.Join(srv.Dir(), "rt", "skills")
			require.NoError(t, os.RemoveAll(copyDir))
			rt, err := stage.Stage(t.Context(), stage.NewBridge(c.runner(h)), root, assets, stage.WithIndex(ix))
			require.NoError(t, err)
			assert.False(t, rt.Assets[0].Reused, "a copy in doubt was reported Reused")
			assert.DirExists(t, filepath.Join(copyDir, "d", "e"))
		})
	}
}
