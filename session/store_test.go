package session

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errInjected = errors.New("injected fault")

// faultFs wraps an afero.Fs and fails the selected operations.
type faultFs struct {
	afero.Fs
	failOpenFile  bool
	failWrite     bool // writes half the bytes, then fails
	shortWrite    bool // writes half the bytes and reports no error
	failSync      bool
	failClose     bool
	failChmod     bool
	failRename    bool
	failRemove    bool
	cancelOnChmod context.CancelFunc // called before a chmod, which then proceeds

	renamed int // successful renames
}

var (
	_ afero.Fs   = (*faultFs)(nil)
	_ afero.File = (*faultFile)(nil)
)

func (f *faultFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if f.failOpenFile && flag&os.O_CREATE != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errInjected}
	}
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFs) Chmod(name string, mode os.FileMode) error {
	if f.cancelOnChmod != nil {
		f.cancelOnChmod()
	}
	if f.failChmod {
		return &fs.PathError{Op: "chmod", Path: name, Err: errInjected}
	}
	return f.Fs.Chmod(name, mode)
}

func (f *faultFs) Rename(oldname, newname string) error {
	if f.failRename {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errInjected}
	}
	if err := f.Fs.Rename(oldname, newname); err != nil {
		return err
	}
	f.renamed++
	return nil
}

func (f *faultFs) Remove(name string) error {
	if f.failRemove {
		return &fs.PathError{Op: "remove", Path: name, Err: errInjected}
	}
	return f.Fs.Remove(name)
}

type faultFile struct {
	afero.File
	fs *faultFs
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.failWrite || f.fs.shortWrite {
		n, err := f.File.Write(p[:len(p)/2])
		if err != nil || f.fs.shortWrite {
			return n, err
		}
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if f.fs.failSync {
		return errInjected
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.fs.failClose && err == nil {
		return errInjected
	}
	return err
}

// backends returns the file systems every store test runs on, each with a
// store directory that does not exist yet.
func backends(t *testing.T) map[string]func(t *testing.T) (afero.Fs, string) {
	t.Helper()
	return map[string]func(t *testing.T) (afero.Fs, string){
		"memmap": func(t *testing.T) (afero.Fs, string) {
			return afero.NewMemMapFs(), "/state/sessions"
		},
		"os": func(t *testing.T) (afero.Fs, string) {
			return afero.NewOsFs(), filepath.Join(t.TempDir(), "state", "sessions")
		},
	}
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, fsys afero.Fs, dir string) []string {
	t.Helper()
	infos, err := afero.ReadDir(fsys, dir)
	require.NoError(t, err)
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	return names
}

func TestStoreRoundTrip(t *testing.T) {
	for name, backend := range backends(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := backend(t)
			ctx := t.Context()
			b := mustBind(t, testConfig(t))
			s := NewStore(fsys, dir)

			_, err := s.Load(ctx, b)
			assert.ErrorIs(t, err, fs.ErrNotExist)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, filepath.Join(dir, label(b.SessionID)+".json"), pe.Path)
			assert.Contains(t, err.Error(), "start a fresh session")

			r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
			require.NoError(t, s.Save(ctx, r))
			got, err := s.Load(ctx, b)
			require.NoError(t, err)
			assert.Equal(t, r, got)

			file := filepath.Join(dir, label(b.SessionID)+".json")
			assert.Equal(t, []string{filepath.Base(file)}, dirNames(t, fsys, dir))
			fi, err := fsys.Stat(file)
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
			data, err := afero.ReadFile(fsys, file)
			require.NoError(t, err)
			want, err := r.Encode()
			require.NoError(t, err)
			assert.Equal(t, want, data)
			di, err := fsys.Stat(dir)
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o700), di.Mode().Perm())

			// Saving again replaces the record.
			r2 := b.NewRecord(RecordIDs{RecordID: "rec-2", BackendSessionID: "backend-2", AgentSessionID: "agent-2"})
			require.NoError(t, s.Save(ctx, r2))
			got, err = s.Load(ctx, b)
			require.NoError(t, err)
			assert.Equal(t, r2, got)
			assert.Equal(t, []string{filepath.Base(file)}, dirNames(t, fsys, dir))
		})
	}
}

func TestStoreSessionIDsDoNotCollide(t *testing.T) {
	ctx := t.Context()
	fsys := afero.NewMemMapFs()
	s := NewStore(fsys, "/state")
	cfg := testConfig(t)
	ids := []string{"session-1", "session/1", "session_1", "../escape", ".."}
	for _, id := range ids {
		c := cfg
		c.SessionID = id
		require.NoError(t, s.Save(ctx, mustBind(t, c).NewRecord(RecordIDs{RecordID: "rec-" + id, BackendSessionID: "b", AgentSessionID: "a"})))
	}
	assert.Len(t, dirNames(t, fsys, "/state"), len(ids))
	for _, id := range ids {
		c := cfg
		c.SessionID = id
		got, err := s.Load(ctx, mustBind(t, c))
		require.NoError(t, err)
		assert.Equal(t, "rec-"+id, got.RecordID)
	}
	exists, err := afero.Exists(fsys, "/escape")
	require.NoError(t, err)
	assert.False(t, exists)
}

func TestStoreFailedSaveLeavesNoTempFile(t *testing.T) {
	faults := []struct {
		name   string
		set    func(*faultFs)
		wantIs error
	}{
		{"create fails", func(f *faultFs) { f.failOpenFile = true }, errInjected},
		{"write fails", func(f *faultFs) { f.failWrite = true }, errInjected},
		{"short write", func(f *faultFs) { f.shortWrite = true }, nil},
		{"sync fails", func(f *faultFs) { f.failSync = true }, errInjected},
		{"close fails", func(f *faultFs) { f.failClose = true }, errInjected},
		{"chmod fails", func(f *faultFs) { f.failChmod = true }, errInjected},
		{"rename fails", func(f *faultFs) { f.failRename = true }, errInjected},
	}
	for bname, backend := range backends(t) {
		for _, withPrevious := range []bool{false, true} {
			for _, fault := range faults {
				name := bname + "/" + fault.name
				if withPrevious {
					name += "/over previous record"
				}
				t.Run(name, func(t *testing.T) {
					ctx := t.Context()
					base, dir := backend(t)
					b := mustBind(t, testConfig(t))
					file := filepath.Join(dir, label(b.SessionID)+".json")
					old := b.NewRecord(RecordIDs{RecordID: "rec-old", BackendSessionID: "backend-old", AgentSessionID: "agent-old"})
					if withPrevious {
						require.NoError(t, NewStore(base, dir).Save(ctx, old))
					} else {
						require.NoError(t, base.MkdirAll(dir, 0o700))
					}

					ffs := &faultFs{Fs: base}
					fault.set(ffs)
					err := NewStore(ffs, dir).Save(ctx, b.NewRecord(RecordIDs{RecordID: "rec-new", BackendSessionID: "backend-new", AgentSessionID: "agent-new"}))
					require.Error(t, err)
					if fault.wantIs != nil {
						assert.ErrorIs(t, err, fault.wantIs)
					}
					var pe *fs.PathError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, file, pe.Path)
					assert.Contains(t, err.Error(), "previous record is unchanged")

					if withPrevious {
						assert.Equal(t, []string{filepath.Base(file)}, dirNames(t, base, dir), "only the previous record remains")
						got, err := NewStore(base, dir).Load(ctx, b)
						require.NoError(t, err)
						assert.Equal(t, old, got)
					} else {
						assert.Empty(t, dirNames(t, base, dir), "no temporary file left behind")
					}
				})
			}
		}
	}
}

func TestStoreReportsTempFileItCouldNotRemove(t *testing.T) {
	ctx := t.Context()
	base := afero.NewMemMapFs()
	ffs := &faultFs{Fs: base, failRename: true, failRemove: true}
	b := mustBind(t, testConfig(t))
	err := NewStore(ffs, "/state").Save(ctx, b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}))
	require.ErrorIs(t, err, errInjected)
	names := dirNames(t, base, "/state")
	require.Len(t, names, 1)
	assert.True(t, strings.HasPrefix(names[0], "."+label(b.SessionID)+".json.tmp-"), names[0])
	assert.Contains(t, err.Error(), names[0])
	assert.Contains(t, err.Error(), "delete it by hand")
}

func TestStoreLoadRejectsOtherBinding(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t)
	b := mustBind(t, cfg)
	s := NewStore(afero.NewMemMapFs(), "/state")
	require.NoError(t, s.Save(ctx, b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})))

	otherWS := realTempDir(t)
	tests := []struct {
		name   string
		mutate func(*Config)
		fields []string
	}{
		{"other workspace", func(c *Config) { c.Workspace = otherWS }, []string{"workspace_digest"}},
		{"other profile", func(c *Config) { c.Profile.ServerVersion = "0.6.0" }, []string{"profile_digest"}},
		{"other model", func(c *Config) { c.Model = "claude-opus-4"; c.Profile.Model = c.Model }, []string{"model", "profile_digest"}},
		{"other permission mode", func(c *Config) { c.PermissionMode = ApproveAll }, []string{"permission_mode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			tt.mutate(&c)
			b2 := mustBind(t, c)
			r, err := s.Load(ctx, b2)
			assert.Equal(t, Record{}, r)
			assert.ErrorIs(t, err, ErrDrift)
			var de *DriftError
			require.ErrorAs(t, err, &de)
			assert.ElementsMatch(t, tt.fields, de.Fields)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, filepath.Join("/state", label(b.SessionID)+".json"), pe.Path)
		})
	}

	t.Run("a record planted under another session's name", func(t *testing.T) {
		fsys := afero.NewMemMapFs()
		s := NewStore(fsys, "/state")
		require.NoError(t, s.Save(ctx, b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})))
		c := cfg
		c.SessionID = "session-2"
		b2 := mustBind(t, c)
		require.NoError(t, fsys.Rename(filepath.Join("/state", label(b.SessionID)+".json"), filepath.Join("/state", label(b2.SessionID)+".json")))
		_, err := s.Load(ctx, b2)
		var de *DriftError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, []string{"session_id"}, de.Fields)
	})
}

func TestStoreLoadRejectsBadFiles(t *testing.T) {
	ctx := t.Context()
	b := mustBind(t, testConfig(t))
	good, err := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"}).Encode()
	require.NoError(t, err)
	file := filepath.Join("/state", label(b.SessionID)+".json")

	tests := []struct {
		name     string
		plant    func(t *testing.T, fsys afero.Fs)
		sentinel error
	}{
		{"empty file", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, nil, 0o600))
		}, ErrMalformedRecord},
		{"truncated record", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, good[:len(good)/2], 0o600))
		}, ErrMalformedRecord},
		{"draft schema-less record", func(t *testing.T, fsys afero.Fs) {
			draft := strings.Replace(string(good), `"schema":"`+Schema+`",`, "", 1)
			require.NoError(t, afero.WriteFile(fsys, file, []byte(draft), 0o600))
		}, ErrUnsupportedSchema},
		{"unknown field", func(t *testing.T, fsys afero.Fs) {
			data := strings.Replace(string(good), "{", `{"resume":"always",`, 1)
			require.NoError(t, afero.WriteFile(fsys, file, []byte(data), 0o600))
		}, ErrUnknownField},
		{"oversized file", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, afero.WriteFile(fsys, file, append(good, make([]byte, maxRecordSize)...), 0o600))
		}, ErrMalformedRecord},
		{"directory in place of the record", func(t *testing.T, fsys afero.Fs) {
			require.NoError(t, fsys.MkdirAll(file, 0o700))
		}, ErrMalformedRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			tt.plant(t, fsys)
			r, err := NewStore(fsys, "/state").Load(ctx, b)
			assert.Equal(t, Record{}, r)
			assert.ErrorIs(t, err, tt.sentinel)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, file, pe.Path)
		})
	}
}

func TestStoreRejectsInvalidInput(t *testing.T) {
	b := mustBind(t, testConfig(t))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()

	t.Run("save canceled context", func(t *testing.T) {
		fsys := afero.NewMemMapFs()
		err := NewStore(fsys, "/state").Save(canceled, b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}))
		assert.ErrorIs(t, err, context.Canceled)
		exists, err := afero.DirExists(fsys, "/state")
		require.NoError(t, err)
		assert.False(t, exists)
	})
	t.Run("context canceled after the write, before the rename", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		base := afero.NewMemMapFs()
		old := b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"})
		require.NoError(t, NewStore(base, "/state").Save(ctx, old))
		ffs := &faultFs{Fs: base, cancelOnChmod: cancel}
		err := NewStore(ffs, "/state").Save(ctx, b.NewRecord(RecordIDs{RecordID: "r2", BackendSessionID: "b", AgentSessionID: "a"}))
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 0, ffs.renamed, "a canceled save never publishes")
		assert.Len(t, dirNames(t, base, "/state"), 1, "no temporary file left behind")
		got, err := NewStore(base, "/state").Load(t.Context(), b)
		require.NoError(t, err)
		assert.Equal(t, old, got)
	})
	t.Run("load canceled context", func(t *testing.T) {
		_, err := NewStore(afero.NewMemMapFs(), "/state").Load(canceled, b)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("save invalid record", func(t *testing.T) {
		fsys := afero.NewMemMapFs()
		r := b.NewRecord(RecordIDs{RecordID: "", BackendSessionID: "b", AgentSessionID: "a"})
		err := NewStore(fsys, "/state").Save(t.Context(), r)
		assert.ErrorIs(t, err, ErrMalformedRecord)
		exists, err := afero.DirExists(fsys, "/state")
		require.NoError(t, err)
		assert.False(t, exists)
	})
	t.Run("load with zero binding", func(t *testing.T) {
		_, err := NewStore(afero.NewMemMapFs(), "/state").Load(t.Context(), Binding{})
		assert.ErrorIs(t, err, ErrInvalidBinding)
	})
	t.Run("nil file system", func(t *testing.T) {
		err := NewStore(nil, "/state").Save(t.Context(), b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}))
		assert.ErrorContains(t, err, "no file system")
		_, err = NewStore(nil, "/state").Load(t.Context(), b)
		assert.ErrorContains(t, err, "no file system")
	})
	t.Run("empty directory", func(t *testing.T) {
		err := NewStore(afero.NewMemMapFs(), "").Save(t.Context(), b.NewRecord(RecordIDs{RecordID: "r", BackendSessionID: "b", AgentSessionID: "a"}))
		assert.ErrorContains(t, err, "directory is empty")
	})
}

func TestStoreConcurrentSavesPublishWholeRecords(t *testing.T) {
	ctx := t.Context()
	fsys := afero.NewOsFs()
	dir := t.TempDir()
	b := mustBind(t, testConfig(t))
	s := NewStore(fsys, dir)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Save(ctx, b.NewRecord(RecordIDs{RecordID: "rec-" + strings.Repeat("x", i+1), BackendSessionID: "b", AgentSessionID: "a"}))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := s.Load(ctx, b)
	require.NoError(t, err)
	assert.Regexp(t, `^rec-x{1,8}$`, got.RecordID)
	assert.Len(t, dirNames(t, fsys, dir), 1)
}

// TestOpenStore: OpenStore creates its directory now (with parents, mode
// 0700) on the host's file system, keeps records there, and refuses a
// blank path, a dangling link and a file.
func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	base := realTempDir(t)
	dir := filepath.Join(base, "state", "sessions")
	s, err := OpenStore(dir)
	require.NoError(t, err)
	assertPrivateDir(t, filepath.Join(base, "state"))
	assertPrivateDir(t, dir)

	b := mustBind(t, testConfig(t))
	r := b.NewRecord(RecordIDs{RecordID: "rec-1", BackendSessionID: "backend-1", AgentSessionID: "agent-1"})
	require.NoError(t, s.Save(ctx, r))
	assert.FileExists(t, filepath.Join(dir, filepath.Base(b.SessionDir)+".json"))
	again, err := OpenStore(dir) // an existing directory: used as it is
	require.NoError(t, err)
	res, err := again.Resume(ctx, b)
	require.NoError(t, err)
	require.Nil(t, res.Fresh)
	assert.Equal(t, r, res.Record)

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
	for _, p := range []string{"", " ", file, filepath.Join(file, "sessions"), dangling, filepath.Join(dangling, "sessions")} {
		s, err := OpenStore(p)
		require.Error(t, err, "%q", p)
		assert.Nil(t, s)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "session.OpenStore", pe.Op)
		assert.Equal(t, p, pe.Path)
	}
	assert.NoDirExists(t, filepath.Join(base, "nowhere"), "a dangling link's target is never created")
}
