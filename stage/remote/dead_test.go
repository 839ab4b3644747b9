package remote_test

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestHostDeadPeerEveryCall: once the connection is gone, every call of
// the Host fails with sandbox.ErrTransport, promptly, and the copy staged
// before stays as it was.
func TestHostDeadPeerEveryCall(t *testing.T) {
	dir := t.TempDir()
	srv := remotetest.NewServer(t, remotetest.WithDir(dir))
	h := dial(t, srv)
	root := path.Join(dir, "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "old")
	_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	require.NoError(t, srv.Close()) // cuts every connection
	writeFiles(t, src, "a", "new")

	calls := map[string]func() error{
		"Run":     func() error { return h.Run(t.Context(), sandbox.Command{Script: "true"}) },
		"Control": func() error { return h.Control(t.Context(), sandbox.Command{Script: "true"}) },
		"Stage": func() error {
			_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
			return err
		},
		"StageVerify": func() error {
			_, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
			return err
		},
		"Probe": func() error {
			_, err := h.Probe(t.Context(), root, []string{"x"})
			return err
		},
		"Fetch": func() error {
			return h.Fetch(t.Context(), root, "x", func(stage.Entry, io.Reader) error { return nil })
		},
		"Assets": func() error {
			_, err := h.Assets(t.Context(), root)
			return err
		},
		"Remove":  func() error { return h.Remove(t.Context(), root, []string{"x"}) },
		"Unstage": func() error { return stage.Unstage(t.Context(), h, root, "x") },
		"ReadFile": func() error {
			_, err := h.ReadFile(t.Context(), path.Join(root, ".airlock-manifest-x.json"), 1<<20)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call()
			require.ErrorIs(t, err, sandbox.ErrTransport)
			assert.Less(t, time.Since(start), 2*time.Second)
		})
	}
	got, err := os.ReadFile(filepath.Join(root, "x", "a"))
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "the previous copy must stay")
}

// TestHostFloodingSandbox: sandbox tools that flood stdout and stderr
// cannot grow the host's memory. A flood in the send command's report
// (here from mkdir) fails the stage with ErrProtocol; one during the other
// control operations (mv and rm: publish, cleanup, unstage) is dropped
// beyond a small bound, and they still do what they say.
func TestHostFloodingSandbox(t *testing.T) {
	for _, c := range []struct {
		name  string
		tools []string
		fails string // the stage's error; "" when it must succeed
	}{
		{"SendReport", []string{"mkdir"}, "a report line of more than 8192 bytes"},
		{"PublishAndUnstage", []string{"mv", "rm"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			// 32 MiB on each stream from every call of the tools.
			for _, tool := range c.tools {
				real, err := lookPath(tool)
				require.NoError(t, err)
				writeFiles(t, bin, tool, "#!/bin/sh\nhead -c 33554432 /dev/zero | tr '\\0' x\nhead -c 33554432 /dev/zero | tr '\\0' y >&2\nexec "+real+" \"$@\"\n")
				require.NoError(t, os.Chmod(filepath.Join(bin, tool), 0o755))
			}
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))

			dir := t.TempDir()
			srv := remotetest.NewServer(t, remotetest.WithDir(dir))
			h := dial(t, srv)
			root := path.Join(dir, "rt")
			src := t.TempDir()
			writeFiles(t, src, "a", "1", "b/c", "2")

			grew := peakHeapGrowth(t, func() {
				rt, err := stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
				if c.fails != "" {
					require.ErrorIs(t, err, sandbox.ErrProtocol)
					require.ErrorContains(t, err, c.fails)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, 2, rt.Assets[0].Files)
				writeFiles(t, src, "a", "changed")
				_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithPrune())
				require.NoError(t, err)
				got, err := os.ReadFile(filepath.Join(root, "x", "a"))
				require.NoError(t, err)
				assert.Equal(t, "changed", string(got))
				require.NoError(t, stage.Unstage(t.Context(), h, root, "x"))
				_, err = os.Lstat(filepath.Join(root, "x"))
				assert.ErrorIs(t, err, os.ErrNotExist, "unstaged")
			})
			t.Logf("heap grew by at most %d KiB while the sandbox sent 64 MiB per tool call", grew>>10)
			assert.Less(t, grew, int64(24<<20), "the host must not keep the flood")
			var out bytes.Buffer
			require.NoError(t, h.Run(t.Context(), sandbox.Command{Script: "echo still-fine", Stdout: &out}))
			assert.Equal(t, "still-fine\n", out.String())
		})
	}
}

// peakHeapGrowth runs fn and returns how far the heap grew above where it
// was before, sampled every few milliseconds.
func peakHeapGrowth(t *testing.T, fn func()) int64 {
	t.Helper()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stop)
		<-sampled
	}()
	fn()
	return int64(peak.Load()) - int64(base.HeapAlloc)
}

func lookPath(tool string) (string, error) {
	for _, d := range []string{"/usr/bin", "/bin"} {
		p := filepath.Join(d, tool)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
