package shell_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

func dirEntry(p string, m fs.FileMode) shell.Entry { return shell.Entry{Path: p, Mode: fs.ModeDir | m} }

// TestModesScriptText pins the script: deepest first (the reverse of walk
// order), one chmod per run of one mode, every name quoted, a failure
// exits 1.
func TestModesScriptText(t *testing.T) {
	got := shell.ModesScript("new/tree/", []shell.Entry{
		dirEntry("a", 0o755), dirEntry("a/b", 0o555), dirEntry("a/b/it's", 0o555), dirEntry("d", 0o700),
	})
	assert.Equal(t, "chmod 700 -- 'new/tree/d' || exit 1\n"+
		"chmod 555 -- 'new/tree/a/b/it'\"'\"'s' 'new/tree/a/b' || exit 1\n"+
		"chmod 755 -- 'new/tree/a' || exit 1\n", string(got))
	assert.Empty(t, shell.ModesScript("", nil), "no directories, no lines")
}

// TestModesScriptSplitsLongRuns: a run of one mode longer than one
// command line should hold is split, each line bounded, every name there
// once, and the length stays linear.
func TestModesScriptSplitsLongRuns(t *testing.T) {
	var dirs []shell.Entry
	name := strings.Repeat("n", 200)
	for i := range 2000 {
		dirs = append(dirs, dirEntry(name+string(rune('a'+i%26))+strings.Repeat("x", i%7), 0o755))
	}
	got := shell.ModesScript("", dirs)
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	require.Greater(t, len(lines), 1, "2000 names of 200 bytes must not share one line")
	n := 0
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 64<<10+64, "a chmod line longer than its bound")
		require.True(t, strings.HasPrefix(l, "chmod 755 -- ") && strings.HasSuffix(l, " || exit 1"), "line %.40q…", l)
		n += strings.Count(l, " '")
	}
	assert.Equal(t, len(dirs), n)
	assert.Less(t, len(got), 2000*(200+16)+len(lines)*32)
}

// TestModesScriptRunsAsUser runs the script as a non-root user under
// busybox over directories that are all 0777 (as the carry or a tar that
// kept an existing directory's mode leaves them): each ends with its mode,
// a directory without its owner's search permission included, which only
// works deepest first.
func TestModesScriptRunsAsUser(t *testing.T) {
	bb := busyboxuser.New(t)
	dir := busyboxuser.Dir(t)
	dirs := []shell.Entry{dirEntry("top", 0o000), dirEntry("top/mid", 0o500), dirEntry("top/mid/leaf", 0o555), dirEntry("top/w", 0o750), dirEntry("other", 0o711)}
	for _, d := range dirs {
		p := filepath.Join(dir, d.Path)
		require.NoError(t, os.Mkdir(p, 0o777))
		require.NoError(t, os.Chmod(p, 0o777))
		require.NoError(t, os.Chown(p, busyboxuser.UID, busyboxuser.GID))
	}
	var stderr bytes.Buffer
	err := bb.Runner(dir).Run(context.Background(), sandbox.Command{Script: string(shell.ModesScript("", dirs)), Stderr: &stderr})
	require.NoError(t, err, "stderr: %s", stderr.String())
	for _, d := range dirs {
		fi, err := os.Stat(filepath.Join(dir, d.Path))
		require.NoError(t, err)
		assert.Equal(t, d.Mode.Perm().String(), fi.Mode().Perm().String(), d.Path)
	}
}

// TestModesScriptFailureExits: a directory that is not there fails the
// script with status 1 naming it (chmod's message), before the lines
// after it.
func TestModesScriptFailureExits(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "a"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(dir, "a"), 0o777))
	var stderr bytes.Buffer
	err := sandbox.Local(dir).Run(context.Background(), sandbox.Command{Script: string(shell.ModesScript("", []shell.Entry{dirEntry("a", 0o700), dirEntry("gone", 0o755)})), Stderr: &stderr})
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.Status)
	assert.Contains(t, stderr.String(), "gone")
	fi, err := os.Stat(filepath.Join(dir, "a"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o777).String(), fi.Mode().Perm().String(), "the line after the failure must not run")
}
