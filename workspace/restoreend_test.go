package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// plainAgentRound prepares a plain directory and makes the agent's
// changes in the sandbox: an edit, a new directory, a deletion, a file
// replaced by a directory, and a large file (spooled on the host). It
// returns the round, the real restore stream of those changes, and the
// host tree before the restore.
func plainAgentRound(t *testing.T) (*env, *fakeRunner, *workspace.Round, []byte, map[string]treetest.Node) {
	t.Helper()
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	fr := &fakeRunner{real: e.spec.Runner}
	e.spec.Runner = fr
	for p, c := range map[string]string{"a": "1\n", "f": "file\n", "gone": "bye\n", "d/keep": "k\n"} {
		write(t, e.local, p, c)
	}
	opts := []workspace.Option{workspace.WithStateDir(filepath.Join(filepath.Dir(e.local), "state"))}
	r, err := workspace.Prepare(ctx(t), e.spec, opts...)
	require.NoError(t, err)
	write(t, e.remote, "a", "agent\n")
	write(t, e.remote, "n/new", "new\n")
	require.NoError(t, os.Remove(filepath.Join(e.remote, "gone")))
	require.NoError(t, os.Remove(filepath.Join(e.remote, "f")))
	write(t, e.remote, "f/x", "x\n")
	write(t, e.remote, "big", strings.Repeat("B", 9<<20))

	var stream bytes.Buffer
	fr.inject = func(cmd sandbox.Command) (bool, error) {
		if !strings.Contains(cmd.Script, "airlock-restore") {
			return false, nil
		}
		real := cmd
		real.Stdout = &stream
		return true, e.spec.Runner.(*fakeRunner).real.Run(context.Background(), real)
	}
	// The real stream, read once without restoring (the round's restore
	// then ends in a hostile error: the stream above went to a buffer).
	_, err = r.Restore(ctx(t))
	require.Error(t, err)
	require.True(t, bytes.HasSuffix(stream.Bytes(), []byte(plainEnd)), "the real stream ends with its end line")
	r, err = workspace.Reopen(ctx(t), e.spec, r.ID(), opts...)
	require.NoError(t, err)
	return e, fr, r, stream.Bytes(), treetest.Snapshot(t, e.local)
}

// TestRestorePlainNeedsWholeStream: a plain restore changes the work tree
// only when the whole stream arrived (its end line) and the command
// succeeded. Whatever prefix of the stream arrives, from a Runner that
// reports success or a cut, at every tar block boundary (where a tar
// stream may end), the restore fails and the host tree is exactly as it
// was: no file written, none deleted, no directory made or removed, no
// temporary file left. Then the whole stream restores everything.
func TestRestorePlainNeedsWholeStream(t *testing.T) {
	e, fr, r, stream, before := plainAgentRound(t)
	start := bytes.Index(stream, []byte("\ntar\n"))
	require.Positive(t, start)
	start += len("\ntar\n")
	var cuts []int
	for n := start; n < len(stream); n += 512 {
		if stream[n-1] == 'B' && stream[n] == 'B' && n%(4<<20) != 0 {
			continue // inside the large file's bytes: a few points are enough
		}
		cuts = append(cuts, n)
	}
	cuts = append(cuts, len(stream)-len(plainEnd), len(stream)-1)
	errCut := fmt.Errorf("%w: connection lost", sandbox.ErrTransport)
	for _, n := range cuts {
		for _, end := range []error{nil, errCut, &sandbox.ExitError{Status: 2}} {
			fr.inject = func(cmd sandbox.Command) (bool, error) {
				if !strings.Contains(cmd.Script, "airlock-restore") {
					return false, nil
				}
				if _, err := cmd.Stdout.Write(stream[:n]); err != nil {
					return true, err
				}
				return true, end
			}
			_, err := r.Restore(ctx(t))
			require.Error(t, err, "cut at %d of %d, command's end %v", n, len(stream), end)
			switch {
			case end == nil:
				assert.ErrorIs(t, err, workspace.ErrHostile, "cut at %d", n)
			case errors.Is(end, sandbox.ErrTransport):
				assert.ErrorIs(t, err, sandbox.ErrTransport, "cut at %d", n)
				assert.NotErrorIs(t, err, workspace.ErrHostile, "cut at %d", n)
			}
			require.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.local)), "cut at %d of %d (command's end %v): %v", n, len(stream), end, err)
		}
	}

	// The whole stream, then a command that failed or was cut: nothing.
	for _, end := range []error{errCut, &sandbox.ExitError{Status: 1}} {
		fr.inject = func(cmd sandbox.Command) (bool, error) {
			if !strings.Contains(cmd.Script, "airlock-restore") {
				return false, nil
			}
			_, err := cmd.Stdout.Write(stream)
			return true, errors.Join(err, end)
		}
		_, err := r.Restore(ctx(t))
		require.Error(t, err)
		require.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.local)), "whole stream, command's end %v: %v", end, err)
	}

	// Data after the end line is the sandbox's: refused, nothing written.
	fr.inject = func(cmd sandbox.Command) (bool, error) {
		if !strings.Contains(cmd.Script, "airlock-restore") {
			return false, nil
		}
		_, err := cmd.Stdout.Write(append(bytes.Clone(stream), "more\n"...))
		return true, err
	}
	_, err := r.Restore(ctx(t))
	require.ErrorIs(t, err, workspace.ErrHostile)
	assert.Contains(t, err.Error(), "goes on after its end line")
	require.Empty(t, treetest.Diff(before, treetest.Snapshot(t, e.local)))

	fr.inject = nil
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "big", "f/x", "n/new"}, res.Updated)
	assert.ElementsMatch(t, []string{"f", "gone"}, res.Deleted)
	assert.Empty(t, treetest.Diff(treeOnly(treetest.Snapshot(t, e.remote)), treeOnly(treetest.Snapshot(t, e.local))))
}

// treeOnly is a snapshot without the runtime directory.
func treeOnly(m map[string]treetest.Node) map[string]treetest.Node {
	for p := range m {
		if p == sandbox.RuntimeDir || strings.HasPrefix(p, sandbox.RuntimeDir+"/") {
			delete(m, p)
		}
	}
	return m
}

// TestRestorePlainDirBits: a directory's permission bits follow the rule
// of a file's content. The sandbox's chmod of a directory that existed at
// Prepare arrives (listed in Updated) when the local directory still has
// the baseline's bits; a local chmod stays; a directory the sandbox left
// alone is not touched, nor listed.
func TestRestorePlainDirBits(t *testing.T) {
	e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
	for _, d := range []string{"agent", "both", "same"} {
		write(t, e.local, d+"/x", "1\n")
	}
	r, err := workspace.Prepare(ctx(t), e.spec, workspace.WithStateDir(filepath.Join(filepath.Dir(e.local), "state")))
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "agent"), 0o700))
	require.NoError(t, os.Chmod(filepath.Join(e.remote, "both"), 0o700))
	require.NoError(t, os.Chmod(filepath.Join(e.local, "both"), 0o750))
	res, err := r.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"agent"}, res.Updated)
	assert.Empty(t, res.Kept)
	for d, want := range map[string]os.FileMode{"agent": 0o700, "both": 0o750, "same": 0o755} {
		fi, err := os.Stat(filepath.Join(e.local, d))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), d)
	}
}
