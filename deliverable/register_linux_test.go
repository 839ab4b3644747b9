//go:build linux

package deliverable_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestRegisterSymlinkSwapRace atomically exchanges a path component (or the
// leaf) between a real workspace entry and a link to an outside secret of the
// same size (renameat2 RENAME_EXCHANGE: the path always exists) while
// registering with the secret's hash. A registration that succeeded would
// have stored the secret.
func TestRegisterSymlinkSwapRace(t *testing.T) {
	secret := []byte("top secret value")
	decoy := []byte("harmless content")
	require.Len(t, decoy, len(secret))
	cases := []struct {
		name, ref string
		setup     func(t *testing.T, ws, out string) (at, alt string)
	}{
		{"directory component", "d/f.csv", func(t *testing.T, ws, out string) (string, string) {
			writeFile(t, ws, "d/f.csv", decoy)
			require.NoError(t, os.Symlink(out, filepath.Join(ws, "alt")))
			return filepath.Join(ws, "d"), filepath.Join(ws, "alt")
		}},
		{"leaf", "f.csv", func(t *testing.T, ws, out string) (string, string) {
			writeFile(t, ws, "f.csv", decoy)
			require.NoError(t, os.Symlink(filepath.Join(out, "f.csv"), filepath.Join(ws, "alt")))
			return filepath.Join(ws, "f.csv"), filepath.Join(ws, "alt")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := t.TempDir()
			writeFile(t, out, "f.csv", secret)
			at, alt := tc.setup(t, f.ws, out)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var swapErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, at, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
						swapErr = err
						return
					}
				}
			}()
			t.Cleanup(func() { close(stop); wg.Wait(); assert.NoError(t, swapErr) })

			seen := map[string]int{}
			// At least 300 tries, more (bounded) until both states were seen:
			// on a loaded machine the swapper may be starved for a while.
			for i := 0; i < 300 || (i < 20000 && (seen["link"] == 0 || seen["real"] == 0)); i++ {
				req := requestFor(tc.ref, fmt.Sprint("k", i), secret)
				rc, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", req)
				require.Error(t, err, "registered %s: the secret was stored", rc.AttachmentID)
				switch {
				case errors.Is(err, deliverable.ErrSymlinkDenied):
					seen["link"]++
				case errors.Is(err, deliverable.ErrHashMismatch):
					seen["real"]++
				case errors.Is(err, deliverable.ErrFileChanged), errors.Is(err, fs.ErrNotExist):
					seen["changed"]++
				default:
					require.NoError(t, err, "unexpected error")
				}
			}
			t.Logf("outcomes: %v", seen)
			assert.Positive(t, seen["link"], "the link state was never hit")
			assert.Positive(t, seen["real"], "the real state was never hit")
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"))
		})
	}
}

// TestRemoteRegisterLeafSwapIsFileChanged exchanges the leaf with a file of
// another size in a loop (renameat2 RENAME_EXCHANGE: the name always
// exists) while registering the leaf's original content through a remote
// workspace (remotetest, read through remote.Host: shell and SFTP). A
// size the first stat saw mid-race is the sandbox's doing: every failure
// is ErrFileChanged, never the agent's size mismatch, and every success
// stored the requested bytes.
func TestRemoteRegisterLeafSwapIsFileChanged(t *testing.T) {
	want := []byte(strings.Repeat("a", 100))
	other := []byte(strings.Repeat("b", 200))
	srv := remotetest.NewServer(t)
	h, err := remote.Dial(t.Context(), srv.Addr(), srv.Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ws := filepath.Join(srv.Dir(), "ws")
	leaf := writeFile(t, ws, "f.csv", want)
	alt := writeFile(t, ws, "alt.csv", other)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var swapErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, leaf, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
				swapErr = err
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait(); assert.NoError(t, swapErr) })

	f := newFixture(t)
	rws := deliverable.RemoteWorkspace(h, ws)
	seen := map[string]int{}
	for i := 0; i < 80; i++ {
		_, err := f.reg.Register(t.Context(), rws, "t", "r", requestFor("f.csv", fmt.Sprint("k", i), want))
		switch {
		case err == nil:
			seen["stored"]++
		case errors.Is(err, deliverable.ErrFileChanged):
			seen["changed"]++
		default:
			require.NoError(t, err, "attempt %d: a swap must surface as ErrFileChanged", i)
		}
	}
	t.Logf("outcomes: %v", seen)
	for name, content := range storeFiles(t, f.fs, f.dir) {
		if strings.HasPrefix(name, "blobs/") {
			assert.Equal(t, string(want), content, "%s holds other bytes", name)
		}
	}
}
