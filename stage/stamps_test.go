package stage_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
)

// sameTree fails t unless dst holds exactly src: every entry, its type,
// its mode and its bytes.
func sameTree(t testing.TB, src, dst string) {
	t.Helper()
	require.Empty(t, treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)), "sandbox copy %s differs from host source %s", dst, src)
}

// compared returns the "trusted" count of the Stage's compare debug record
// (-1 when there was no compare).
func compared(t *testing.T, log *logRecorder) int {
	t.Helper()
	for _, r := range log.logged() {
		if r.msg == "stage: compared the source with the sandbox's manifest" {
			n, err := strconv.Atoi(r.attrs["trusted"])
			require.NoError(t, err)
			return n
		}
	}
	return -1
}

// stampsTree writes n files under a fresh directory and returns it.
func stampsTree(t *testing.T, n int) string {
	t.Helper()
	src := t.TempDir()
	var spec []string
	for i := range n {
		spec = append(spec, "d"+strconv.Itoa(i%3)+"/f"+strconv.Itoa(i)+"=content "+strconv.Itoa(i))
	}
	build(t, src, spec...)
	return src
}

// TestIndexStampsSkipUnchangedReads: with an Index, the Stage after a
// publish reads only the files whose stamps moved — in the same process
// and in a new one (a persistent Index) — and every change arrives, also
// one made with the same size and the old modification time (its change
// time moved).
func TestIndexStampsSkipUnchangedReads(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		forEachSandbox(t, func(t *testing.T, sb sbox) {
			t.Log("persistent index:", persistent)
			src := stampsTree(t, 30)
			dir := filepath.Join(t.TempDir(), "state")
			newIndex := func() *stage.Index {
				if persistent {
					return openIndex(t, dir)
				}
				return stage.NewIndex()
			}
			ix := newIndex()
			run := func() (stage.StagedAsset, int) {
				log := new(logRecorder)
				if persistent {
					ix = newIndex() // a new process
				}
				rt, err := stage.Stage(context.Background(), sb, sb.root, []stage.Asset{{Name: "s", Source: src}},
					stage.WithIndex(ix), stage.WithRacyWindow(0), stage.WithLogger(slog.New(log)))
				require.NoError(t, err)
				return rt.Assets[0], compared(t, log)
			}
			_, n := run()
			require.Equal(t, -1, n, "the first stage has nothing to compare with")
			time.Sleep(10 * time.Millisecond) // the files changed before the next stage began

			p := filepath.Join(src, "d1", "f4")
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, []byte("CONTENT 4"), 0o644)) // same size
			require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
			require.NoError(t, os.WriteFile(filepath.Join(src, "d2", "f5"), []byte("longer content 5"), 0o644))
			time.Sleep(10 * time.Millisecond)
			sa, n := run()
			assert.Equal(t, 28, n, "the two changed files are read, no other")
			assert.Equal(t, 2, sa.Sent)
			sameTree(t, src, filepath.Join(sb.hostRoot, "s"))

			sa, n = run()
			assert.True(t, sa.Reused || n == 30, "an unchanged source: reused from the index, or compared without a read (trusted %d)", n)
			sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
		})
	}
}

// TestIndexStampsRacy: files that changed within the racy window of the
// stage that recorded their stamps are read again, whatever their stamps.
func TestIndexStampsRacy(t *testing.T) {
	sb := sandboxes[0].new(t)
	src := stampsTree(t, 10)
	ix := stage.NewIndex()
	as := []stage.Asset{{Name: "s", Source: src}}
	_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(time.Hour))
	require.NoError(t, err)
	build(t, src, "new=1")
	log := new(logRecorder)
	_, err = stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(ix), stage.WithRacyWindow(time.Hour), stage.WithLogger(slog.New(log)))
	require.NoError(t, err)
	assert.Equal(t, 0, compared(t, log), "no file older than the window: every file is read")
	sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
}

// TestIndexStampsFileHostile: a stamps file that is corrupt, truncated,
// another source's, a link or a directory is discarded with a warning;
// the stage reads every file and is exact.
func TestIndexStampsFileHostile(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, path, other string)
	}{
		{"flipped byte", func(t *testing.T, p, _ string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b[len(b)/2] ^= 1
			require.NoError(t, os.WriteFile(p, b, 0o600))
		}},
		{"truncated", func(t *testing.T, p, _ string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b[:len(b)-40], 0o600))
		}},
		{"another source's", func(t *testing.T, p, other string) {
			b, err := os.ReadFile(other)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o600))
		}},
		{"a link", func(t *testing.T, p, other string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(other, p))
		}},
		{"a directory", func(t *testing.T, p, _ string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o700))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := sandboxes[0].new(t)
			dir := filepath.Join(t.TempDir(), "state")
			src, src2 := stampsTree(t, 12), stampsTree(t, 12)
			as, as2 := []stage.Asset{{Name: "s", Source: src}}, []stage.Asset{{Name: "s2", Source: src2}}
			for _, a := range [][]stage.Asset{as, as2} {
				_, err := stage.Stage(context.Background(), sb, sb.root, a, stage.WithIndex(openIndex(t, dir)), stage.WithRacyWindow(0))
				require.NoError(t, err)
			}
			p, other := stage.IndexStampsPath(openIndex(t, dir), as[0]), stage.IndexStampsPath(openIndex(t, dir), as2[0])
			require.FileExists(t, p)
			c.plant(t, p, other)
			time.Sleep(10 * time.Millisecond)
			build(t, src, "d0/f0=changed")
			time.Sleep(10 * time.Millisecond)
			log, ilog := new(logRecorder), new(logRecorder)
			_, err := stage.Stage(context.Background(), sb, sb.root, as, stage.WithIndex(openIndex(t, dir, stage.WithIndexLogger(slog.New(ilog)))),
				stage.WithRacyWindow(0), stage.WithLogger(slog.New(log)))
			require.NoError(t, err)
			assert.Equal(t, 0, compared(t, log), "nothing is trusted from an unusable stamps file")
			sameTree(t, src, filepath.Join(sb.hostRoot, "s"))
			assert.Contains(t, ilog.messages(), "stage: stamps file discarded; this stage hashes the source, and the next one that publishes it replaces the file")
			fi, err := os.Lstat(p)
			if c.name != "a directory" {
				require.NoError(t, err)
				assert.True(t, fi.Mode().IsRegular(), "the next publish replaced it")
			}
		})
	}
}
