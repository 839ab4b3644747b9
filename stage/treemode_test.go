package stage_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// TestDeltaCopyRootMode: a staged copy's top directory is 0755 after every
// publish, first or delta, whatever path the carry took. A Source with a
// directory its owner cannot both list and enter (0300 here) makes a
// non-root sandbox's carry fall back to a copy made anew (the linked copy
// cannot be read), whose top directory the send command makes under
// umask 0; busybox's tar, as a non-root user, leaves the mode of a
// directory that exists alone, so the copy's top directory used to stay
// 0777: writable by every user of the sandbox (an outside helper's
// finding).
func TestDeltaCopyRootMode(t *testing.T) {
	for name, runner := range deltaRunners {
		for _, dm := range []fs.FileMode{0o300, 0o700, 0o555} {
			t.Run(fmt.Sprintf("%s/%o", name, dm), func(t *testing.T) {
				r, root := runner(t)
				src := t.TempDir()
				build(t, src, "d/x=x\n", "c=0\n")
				require.NoError(t, os.Chmod(filepath.Join(src, "d"), dm))
				t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "d"), 0o700) })
				b := stage.NewBridge(r)
				for i := range 3 {
					a := restageOne(t, b, root, src, "c", fmt.Sprint(i))
					if i > 0 {
						require.Equal(t, 1, a.Sent, "stage %d: only c changed", i)
					}
					fi, err := os.Stat(filepath.Join(root, "a"))
					require.NoError(t, err)
					require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "stage %d: the copy's top directory", i)
					fi, err = os.Stat(filepath.Join(root, "a", "d"))
					require.NoError(t, err)
					require.Equal(t, dm, fi.Mode().Perm(), "stage %d: d", i)
					require.Equal(t, fmt.Sprint(i), readFile(t, filepath.Join(root, "a", "c")))
				}
			})
		}
	}
}
