package sandbox_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLocalRunnerDetails pins what stagetest.TestRunner leaves open for
// other runners: LocalRunner names the signal that killed a command, and
// says, with fs.ErrNotExist, that a working directory is missing.
func TestLocalRunnerDetails(t *testing.T) {
	dir := t.TempDir()
	r := sandbox.Local(dir)
	t.Run("SignalName", func(t *testing.T) {
		for _, sig := range []string{"KILL", "TERM", "INT"} {
			err := r.Run(context.Background(), sandbox.Command{Script: "kill -s " + sig + " $$"})
			var ee *sandbox.ExitError
			require.ErrorAs(t, err, &ee, sig)
			assert.Equal(t, sandbox.ExitError{Status: -1, Signal: sig}, *ee)
			assert.ErrorContains(t, err, "signal "+sig)
		}
	})
	t.Run("MissingDir", func(t *testing.T) {
		missing := filepath.Join(dir, "missing")
		err := r.Run(context.Background(), sandbox.Command{Script: "true", Dir: "missing"})
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorContains(t, err, "the working directory "+missing+" is missing")
		err = sandbox.Local(missing).Run(context.Background(), sandbox.Command{Script: "true"})
		assert.ErrorIs(t, err, fs.ErrNotExist, "the Runner's own directory")
	})
	t.Run("DirIsAFile", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
		err := r.Run(context.Background(), sandbox.Command{Script: "true", Dir: "file"})
		assert.ErrorIs(t, err, syscall.ENOTDIR)
		assert.ErrorContains(t, err, "is not a directory")
	})
	t.Run("EnvKeys", func(t *testing.T) {
		for _, k := range []string{"", "A=B", "A-B", "1A", "A\x00B", "Ä"} {
			err := r.Run(context.Background(), sandbox.Command{Script: "true", Env: map[string]string{k: "v"}})
			assert.ErrorContains(t, err, "[A-Za-z_][A-Za-z0-9_]*", "key %q", k)
		}
		err := r.Run(context.Background(), sandbox.Command{Script: "true", Env: map[string]string{"OK": "a\x00b"}})
		assert.ErrorContains(t, err, "NUL")
		assert.NoError(t, r.Run(context.Background(), sandbox.Command{Script: "true", Env: map[string]string{"_": "x", "_a9Z": "y"}}))
	})
}
