package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttack48SaveOverDirectory: a directory planted at a record's path
// is Undecodable, and saving a new record replaces it when it is empty, as
// the documentation of Undecodable says (an outside attack: Save failed
// with "file exists" and claimed a previous record it did not have); one
// that holds entries is left whole, and the error says what to do.
func TestAttack48SaveOverDirectory(t *testing.T) {
	for _, fsys := range []afero.Fs{afero.NewOsFs(), afero.NewMemMapFs()} {
		b := mustBind(t, testConfig(t))
		dir := filepath.Join(realTempDir(t), "sessions")
		s := NewStore(fsys, dir)
		p := s.path(b.SessionID)
		require.NoError(t, fsys.MkdirAll(p, 0o700))
		got, err := s.Resume(t.Context(), b)
		require.NoError(t, err)
		require.NotNil(t, got.Fresh)
		assert.Equal(t, Undecodable, got.Fresh.Reason)

		rec := b.NewRecord(a46IDs)
		require.NoError(t, s.Save(t.Context(), rec), "an empty directory is replaced")
		got, err = s.Resume(t.Context(), b)
		require.NoError(t, err)
		assert.Equal(t, Resumption{Record: rec}, got)

		require.NoError(t, fsys.Remove(p))
		require.NoError(t, fsys.MkdirAll(filepath.Join(p, "keep"), 0o700))
		err = s.Save(t.Context(), rec)
		require.Error(t, err)
		assert.Equal(t, "session.Store.Save "+p+": record not saved: a directory that holds entries stands at the record's path; "+
			"it is not the store's to empty: move it away and save again", err.Error())
		fi, err := fsys.Stat(filepath.Join(p, "keep"))
		require.NoError(t, err)
		assert.True(t, fi.IsDir(), "what the directory holds stays")
	}
}

// TestAttack48SaveSweepsKilledWritersTemps: the temporary files that save
// writers killed mid-save left (an outside attack: five stayed through
// any number of saves) go at the record's next save once stale; a fresh
// one (a save that may still run) and other records' stay.
func TestAttack48SaveSweepsKilledWritersTemps(t *testing.T) {
	b := mustBind(t, testConfig(t))
	dir := filepath.Join(realTempDir(t), "sessions")
	s := NewStore(afero.NewOsFs(), dir)
	rec := b.NewRecord(a46IDs)
	require.NoError(t, s.Save(t.Context(), rec))
	base := filepath.Base(s.path(b.SessionID))
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"." + base + ".tmp-DEAD1", "." + base + ".tmp-DEAD2", "." + base + ".tmp-FRESH", ".other.json.tmp-DEAD"} {
		p := filepath.Join(dir, n)
		require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
		if !strings.HasSuffix(n, "FRESH") {
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	require.NoError(t, s.Save(t.Context(), rec))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{base, "." + base + ".tmp-FRESH", ".other.json.tmp-DEAD"}, names)
}
