package remote_test

import (
	"os"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// TestVerifyLongPathOverSFTP: a copy whose absolute path in the sandbox
// is longer than PATH_MAX (a 4,080-byte path inside the asset, under the
// 4,086 bytes stage allows) stages, and WithVerify reads it back (through
// the shell protocol, by relative names: SFTP names files by absolute
// path) and reuses it. An outside attack found the verify failing with a
// retryable transport error ("file name too long") on every retry.
func TestVerifyLongPathOverSFTP(t *testing.T) {
	src := t.TempDir()
	rel := treetest.WriteDeep(t, src, 4080, "deep\n")
	require.NoError(t, os.WriteFile(src+"/top", []byte("top\n"), 0o644))

	srv := remotetest.NewServer(t)
	h := srv.Dial(t)
	root := path.Join(srv.Dir(), "rt")
	require.Greater(t, len(root)+len("/a/")+len(rel), 4096, "the test's copy must pass PATH_MAX")
	assets := []stage.Asset{{Name: "a", Source: src}}
	_, err := stage.Stage(t.Context(), h, root, assets)
	require.NoError(t, err)
	rt, err := stage.Stage(t.Context(), h, root, assets, stage.WithVerify())
	require.NoError(t, err)
	assert.True(t, rt.Assets[0].Reused)
}
