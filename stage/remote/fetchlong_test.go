package remote_test

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestVerifyLongPathOverSFTP: a copy whose absolute path in the sandbox
// is longer than PATH_MAX (a 4,080-byte path inside the asset, under the
// host's 4,096-byte limit) stages, and WithVerify reads it back (through
// the shell protocol, by relative names: SFTP names files by absolute
// path) and reuses it. An outside attack found the verify failing with a
// retryable transport error ("file name too long") on every retry.
func TestVerifyLongPathOverSFTP(t *testing.T) {
	src := t.TempDir()
	r, err := os.OpenRoot(src)
	require.NoError(t, err)
	defer r.Close()
	var parts []string
	for range 20 {
		parts = append(parts, strings.Repeat("d", 200))
	}
	dir := path.Join(parts...)
	name := strings.Repeat("f", 4080-len(dir)-1)
	require.NoError(t, r.MkdirAll(dir, 0o755))
	require.NoError(t, r.WriteFile(path.Join(dir, name), []byte("deep\n"), 0o644))
	require.NoError(t, r.WriteFile("top", []byte("top\n"), 0o644))

	srv := remotetest.NewServer(t)
	h := srv.Dial(t)
	root := path.Join(srv.Dir(), "rt")
	require.Greater(t, len(root)+len("/a/")+len(dir)+1+len(name), 4096, "the test's copy must pass PATH_MAX")
	assets := []stage.Asset{{Name: "a", Source: src}}
	_, err = stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	rt, err := stage.Stage(t.Context(), h, root, assets, stage.WithVerify())
	require.NoError(t, err)
	assert.True(t, rt.Assets[0].Reused)
}
