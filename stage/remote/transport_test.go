package remote_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestHostReportsItsControlTimeout: the Host is a sandbox.ControlTimeouter,
// so that every package's control steps through it (a Bridge of its own,
// workspace, deliverable) use Config.ControlTimeout.
func TestHostReportsItsControlTimeout(t *testing.T) {
	srv := remotetest.NewServer(t)
	for _, c := range []struct{ set, want time.Duration }{
		{0, sandbox.MaxControlTimeout},
		{time.Second, time.Second},
		{time.Hour, sandbox.MaxControlTimeout},
	} {
		h := dial(t, srv, func(cfg *remote.Config) { cfg.ControlTimeout = c.set })
		assert.Equal(t, c.want, sandbox.ControlDeadline(h), "Config.ControlTimeout %s", c.set)
	}
}

// TestStageDropSweep drops the connection after n bytes from the host, for
// n across every phase of a stage (handshake, probe, setup, transfer,
// publish): each failure wraps sandbox.ErrTransport, the asset is always a
// whole copy (the old one unless the publish ran), and a stage on a new
// connection succeeds.
func TestStageDropSweep(t *testing.T) {
	dir := t.TempDir()
	root := path.Join(dir, "rt")
	src := t.TempDir()
	writeFiles(t, src, "a", "old", "b", "kept")
	good := remotetest.NewServer(t, remotetest.WithDir(dir))
	_, err := stage.Stage(t.Context(), dial(t, good), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	failed := 0
	for n := int64(1000); n < 120000; n += 7919 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(src, "a"), append(big, fmt.Sprint(n)...), 0o644))
			flaky := remotetest.NewServer(t, remotetest.WithDir(dir), remotetest.WithDropAfter(n))
			h, err := remote.Dial(t.Context(), flaky.Addr(), flaky.Config())
			if err == nil {
				t.Cleanup(func() { _ = h.Close() })
				_, err = stage.Stage(t.Context(), h, root, []stage.Asset{{Name: "x", Source: src}})
			}
			if err != nil {
				failed++
				require.ErrorIs(t, err, sandbox.ErrTransport)
				var ee *sandbox.ExitError
				assert.False(t, errors.As(err, &ee), "a dropped connection is no exit status: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(root, "x", "b"))
			require.NoError(t, err, "the asset is not whole")
			assert.Equal(t, "kept", string(got))
			_, err = stage.Stage(t.Context(), dial(t, good), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			got, err = os.ReadFile(filepath.Join(root, "x", "a"))
			require.NoError(t, err)
			assert.Equal(t, append(big, fmt.Sprint(n)...), got)
		})
	}
	assert.Positive(t, failed, "no drop point hit a stage")
}
