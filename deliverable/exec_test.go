package deliverable_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
)

// TestExecRemoteRegister registers a binary file of a remote workspace
// reached through sandbox.Exec (the plain sh -c prefix and a prefix
// process in front of it): the bytes are hashed on the host as they come
// out of the exec stream, a replay is idempotent, and a link in the path
// is refused.
func TestExecRemoteRegister(t *testing.T) {
	data := make([]byte, 1<<20+7)
	_, _ = rand.Read(data)
	for name, r := range map[string]sandbox.Runner{
		"plain":  sandbox.Exec(),
		"prefix": sandbox.Exec("sh", "-c", `exec "$@"`, "sh"),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "out/r.bin", data)
			require.NoError(t, os.Symlink(filepath.Join(f.ws, "out"), filepath.Join(f.ws, "link")))
			ws := deliverable.RemoteWorkspace(r, f.ws)

			req := requestFor("out/r.bin", "k", data)
			rc, err := f.reg.Register(t.Context(), ws, "task-1", "run-1", req)
			require.NoError(t, err)
			assert.Equal(t, deliverable.Applied, rc.Disposition)
			assert.Equal(t, int64(len(data)), rc.ByteSize)
			assert.Equal(t, sum(data), rc.SHA256)
			stored := storeFiles(t, f.fs, f.dir)
			var found bool
			for _, content := range stored {
				found = found || bytes.Equal([]byte(content), data)
			}
			assert.True(t, found, "the stored blob is not the file's bytes")

			again, err := f.reg.Register(t.Context(), ws, "task-1", "run-1", req)
			require.NoError(t, err)
			assert.Equal(t, rc, again)

			_, err = f.reg.Register(t.Context(), ws, "task-1", "run-1", requestFor("link/r.bin", "k2", data))
			assert.ErrorIs(t, err, deliverable.ErrSymlinkDenied)

			bad := requestFor("out/r.bin", "k3", data)
			bad.ByteSize++
			_, err = f.reg.Register(t.Context(), ws, "task-1", "run-1", bad)
			assert.ErrorIs(t, err, deliverable.ErrSizeMismatch)
		})
	}
}
