package stage_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/stage"
)

// TestOpenIndexServesNewProcess checks that a second Index opened on the
// same directory — what a new process sees — serves an unchanged source
// from its record (it reports what the record says, so no content was
// read) for one round trip, and that a changed source is hashed and its new
// record written.
func TestOpenIndexServesNewProcess(t *testing.T) {
	forEachSandbox(t, func(t *testing.T, sb sbox) {
		src := t.TempDir()
		build(t, src, "f=12345", "d/g=abc", "l -> f")
		assets := []stage.Asset{{Name: "i", Source: src}}
		dir := filepath.Join(t.TempDir(), "state")
		stageWith := func(ix *stage.Index) *stage.Runtime {
			t.Helper()
			rt, err := stage.Stage(context.Background(), sb, sb.root, assets, stage.WithIndex(ix), stage.WithRacyWindow(0))
			require.NoError(t, err)
			return rt
		}
		first := stageWith(openIndex(t, dir))
		assert.False(t, first.Assets[0].Reused)
		assert.Equal(t, 2, first.Assets[0].Files)

		ix := openIndex(t, dir)
		require.NoError(t, stage.SetIndexFileFiles(ix, 999))
		var before int64
		if sb.runs != nil {
			before = sb.runs.Load()
		}
		rt := stageWith(openIndex(t, dir))
		assert.True(t, rt.Assets[0].Reused)
		assert.Equal(t, 999, rt.Assets[0].Files, "an unchanged source must come from the record on disk")
		assert.Equal(t, []string{"l"}, rt.Assets[0].Skipped)
		assert.Equal(t, first.Assets[0].Digest, rt.Assets[0].Digest)
		if sb.runs != nil {
			assert.Equal(t, int64(1), sb.runs.Load()-before, "an index hit costs one round trip")
		}

		require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("54321"), 0o644))
		rt = stageWith(openIndex(t, dir))
		assert.False(t, rt.Assets[0].Reused)
		assert.Equal(t, 2, rt.Assets[0].Files, "a changed source must be hashed")
		assert.Equal(t, 1, rt.Assets[0].Sent)
		assert.Equal(t, "54321", readFile(t, sb.host("i/f")))

		require.NoError(t, stage.SetIndexFileFiles(ix, 999))
		rt = stageWith(openIndex(t, dir))
		assert.True(t, rt.Assets[0].Reused)
		assert.Equal(t, 999, rt.Assets[0].Files, "the changed source's new record must have been written")
	})
}

// logRecorder is a slog.Handler that keeps each record's message and
// attributes, as text.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

func (*logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler     { return l }
func (l *logRecorder) WithGroup(string) slog.Handler          { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

func (l *logRecorder) logged() []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// messages lists the messages logged.
func (l *logRecorder) messages() []string {
	var out []string
	for _, r := range l.logged() {
		out = append(out, r.msg)
	}
	return out
}

const (
	msgDiscarded  = "stage: index record discarded; the next stage of its source replaces it"
	msgNotWritten = "stage: index record not written; a later process will hash this source again"
)

func openIndex(t *testing.T, dir string, opts ...stage.IndexOption) *stage.Index {
	t.Helper()
	ix, err := stage.OpenIndex(dir, opts...)
	require.NoError(t, err)
	return ix
}

func TestOpenIndexDirectory(t *testing.T) {
	t.Run("MissingIsCreated0700", func(t *testing.T) {
		base := t.TempDir()
		dir := filepath.Join(base, "a", "state")
		openIndex(t, dir)
		for _, p := range []string{filepath.Join(base, "a"), dir} {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
			assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), p)
		}
	})
	t.Run("ExistingIsKept", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o750))
		openIndex(t, dir)
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o750), fi.Mode().Perm())
	})
	t.Run("Relative", func(t *testing.T) {
		_, err := stage.OpenIndex("state")
		assert.EqualError(t, err, `stage: open index: "state" is not an absolute host path; pass an absolute state directory such as $HOME/.cache/airlock/stage-index`)
		_, err = stage.OpenIndex("")
		assert.EqualError(t, err, `stage: open index: "" is not an absolute host path; pass an absolute state directory such as $HOME/.cache/airlock/stage-index`)
	})
	t.Run("FileInTheWay", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		_, err := stage.OpenIndex(file)
		assert.ErrorIs(t, err, syscall.ENOTDIR)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, file, pe.Path)
	})
}

// indexFixture stages a source once through a persistent index and makes
// its record claim 999 files, so that a record trusted later shows.
type indexFixture struct {
	sb     sbox
	assets []stage.Asset
	dir    string
	path   string // the source's record file
	valid  []byte // its content, claiming 999 files
}

func newIndexFixture(t *testing.T) indexFixture {
	t.Helper()
	sb := sandboxes[0].new(t)
	src := t.TempDir()
	build(t, src, "f=12345", "d/g=abc")
	f := indexFixture{sb: sb, assets: []stage.Asset{{Name: "i", Source: src}}, dir: filepath.Join(t.TempDir(), "state")}
	ix := openIndex(t, f.dir)
	_, err := stage.Stage(context.Background(), sb, sb.root, f.assets, stage.WithIndex(ix), stage.WithRacyWindow(0))
	require.NoError(t, err)
	require.NoError(t, stage.SetIndexFileFiles(ix, 999))
	f.path = stage.IndexRecordPath(ix, f.assets[0])
	f.valid, err = os.ReadFile(f.path)
	require.NoError(t, err)
	return f
}

// stage stages the fixture's source through a new index on its directory
// and returns the staged asset and the log.
func (f indexFixture) stage(t *testing.T) (stage.StagedAsset, *logRecorder) {
	t.Helper()
	log := new(logRecorder)
	ix := openIndex(t, f.dir, stage.WithIndexLogger(slog.New(log)))
	rt, err := stage.Stage(context.Background(), f.sb, f.sb.root, f.assets, stage.WithIndex(ix), stage.WithRacyWindow(0))
	require.NoError(t, err)
	return rt.Assets[0], log
}

// assertDiscarded checks that log holds exactly one record: f's record
// file discarded for a reason that contains reason.
func assertDiscarded(t *testing.T, f indexFixture, log *logRecorder, reason string) {
	t.Helper()
	recs := log.logged()
	require.Len(t, recs, 1, "want one log line, got %v", recs)
	assert.Equal(t, msgDiscarded, recs[0].msg)
	assert.Equal(t, f.path, recs[0].attrs["path"])
	assert.Contains(t, recs[0].attrs["err"], reason)
}

// TestIndexDiscardsBadRecord plants bad record files and checks that each
// is discarded with a log line naming it and the reason, never trusted, and
// replaced by the stage that follows.
func TestIndexDiscardsBadRecord(t *testing.T) {
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
	}
	constant := func(s string) func([]byte) []byte { return func([]byte) []byte { return []byte(s) } }
	cases := []struct {
		name   string
		mutate func(valid []byte) []byte
		reason string
	}{
		{"Garbage", constant("\x00\x01not a record"), "not a JSON record (corrupt or truncated)"},
		{"Empty", constant(""), "not a JSON record (corrupt or truncated)"},
		{"Truncated", func(b []byte) []byte { return b[:len(b)/2] }, "not a JSON record (corrupt or truncated)"},
		{"TruncatedByOne", func(b []byte) []byte { return b[:len(b)-1] }, "not a JSON record (corrupt or truncated)"},
		{"WrongVersion", replace("airlock.stage.index.v1", "airlock.stage.index.v2"), `record schema "airlock.stage.index.v2", want "airlock.stage.index.v1"`},
		{"NoSchema", replace(`"schema":"airlock.stage.index.v1",`, ""), `record schema none, want "airlock.stage.index.v1"`},
		{"NotAnObject", constant(`["airlock.stage.index.v1"]`), "not a JSON record (corrupt or truncated)"},
		{"UnknownField", replace(`"files":`, `"extra":1,"files":`), "record is not in canonical form"},
		{"DuplicateField", replace(`"files":999`, `"files":2,"files":999`), "record is not in canonical form"},
		{"WrongCase", replace(`"files":`, `"Files":`), "record is not in canonical form"},
		{"MissingField", replace(`"bytes":8,`, ""), "record is not in canonical form"},
		{"TrailingNewline", func(b []byte) []byte { return append(b, '\n') }, "record is not in canonical form"},
		{"TrailingRecord", func(b []byte) []byte { return append(b, b...) }, "not a JSON record (corrupt or truncated)"},
		{"WrongType", replace(`"files":999`, `"files":"999"`), "malformed record"},
		{"UppercaseSum", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"sum":"`)) + len(`"sum":"`)
			out := bytes.Clone(b)
			copy(out[i:i+64], bytes.ToUpper(out[i:i+64]))
			return out
		}, "bad fingerprint"},
		{"BadDigest", replace(`"digest":"sha256:`, `"digest":"md5:`), "bad manifest digest"},
		{"NegativeFiles", replace(`"files":999`, `"files":-1`), "negative count (files -1, bytes 8)"},
		{"OtherSource", func([]byte) []byte {
			b, err := stage.EncodeIndexRecord("another source", 1, digest.Of(nil), 999, 8, nil)
			if err != nil {
				panic(err)
			}
			return b
		}, "record belongs to another source"},
		{"Oversized", func(b []byte) []byte { return append(b, bytes.Repeat([]byte(" "), 16<<20)...) }, "is larger than 16777216 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newIndexFixture(t)
			require.Contains(t, string(f.valid), `"bytes":8,`, "the fixture's record changed shape; update the cases")
			require.NoError(t, os.WriteFile(f.path, c.mutate(f.valid), 0o600))
			sa, log := f.stage(t)
			assert.True(t, sa.Reused)
			assert.Equal(t, 2, sa.Files, "a bad record must not be trusted")
			assertDiscarded(t, f, log, c.reason)
			assertReplaced(t, f)
		})
	}
	t.Run("Symlink", func(t *testing.T) {
		f := newIndexFixture(t)
		elsewhere := filepath.Join(t.TempDir(), "record.json")
		require.NoError(t, os.WriteFile(elsewhere, f.valid, 0o600))
		require.NoError(t, os.Remove(f.path))
		require.NoError(t, os.Symlink(elsewhere, f.path))
		sa, log := f.stage(t)
		assert.Equal(t, 2, sa.Files, "a record reached through a link must not be trusted")
		assertDiscarded(t, f, log, f.path+" is a symbolic link, not a record file")
		assertReplaced(t, f)
		assert.Equal(t, string(f.valid), readFile(t, elsewhere), "the link's target must not be written")
	})
	t.Run("FIFO", func(t *testing.T) {
		f := newIndexFixture(t)
		require.NoError(t, os.Remove(f.path))
		require.NoError(t, syscall.Mkfifo(f.path, 0o600))
		sa, log := f.stage(t)
		assert.Equal(t, 2, sa.Files)
		assertDiscarded(t, f, log, f.path+" is not a regular file")
		assertReplaced(t, f)
	})
	t.Run("WithoutLogger", func(t *testing.T) {
		f := newIndexFixture(t)
		require.NoError(t, os.WriteFile(f.path, []byte("corrupt"), 0o600))
		ix := openIndex(t, f.dir)
		rt, err := stage.Stage(context.Background(), f.sb, f.sb.root, f.assets, stage.WithIndex(ix), stage.WithRacyWindow(0))
		require.NoError(t, err)
		assert.Equal(t, 2, rt.Assets[0].Files)
	})
}

// assertReplaced checks that the record file is a valid record again: a
// new index trusts it.
func assertReplaced(t *testing.T, f indexFixture) {
	t.Helper()
	fi, err := os.Lstat(f.path)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the stage must replace the bad file with a record")
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, stage.SetIndexFileFiles(openIndex(t, f.dir), 999))
	sa, log := f.stage(t)
	assert.Equal(t, 999, sa.Files, "the replacement record must be trusted")
	assert.Empty(t, log.logged())
}

// TestIndexWriteFailureIsLogged puts a directory where a record file goes:
// it cannot be read nor replaced; Stage still succeeds and both failures
// are logged.
func TestIndexWriteFailureIsLogged(t *testing.T) {
	f := newIndexFixture(t)
	require.NoError(t, os.Remove(f.path))
	require.NoError(t, os.MkdirAll(filepath.Join(f.path, "keep"), 0o700))
	sa, log := f.stage(t)
	assert.Equal(t, 2, sa.Files)
	recs := log.logged()
	require.Len(t, recs, 2, "%v", recs)
	assert.Equal(t, []string{msgDiscarded, msgNotWritten}, log.messages())
	for _, r := range recs {
		assert.Equal(t, f.path, r.attrs["path"])
	}
	assert.Contains(t, recs[0].attrs["err"], f.path+" is not a regular file")
	assert.Contains(t, recs[1].attrs["err"], "rename ")
}

// TestIndexForgetsUnusable checks that a stage whose metadata cannot be
// trusted (files changed within the racy window) removes the record.
func TestIndexForgetsUnusable(t *testing.T) {
	f := newIndexFixture(t)
	log := new(logRecorder)
	ix := openIndex(t, f.dir, stage.WithIndexLogger(slog.New(log)))
	rt, err := stage.Stage(context.Background(), f.sb, f.sb.root, f.assets, stage.WithIndex(ix))
	require.NoError(t, err)
	assert.Equal(t, 2, rt.Assets[0].Files, "fresh files must be hashed")
	_, err = os.Lstat(f.path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	stage.IndexForgetSum(ix, f.assets[0]) // nothing left to remove
	assert.Empty(t, log.logged())
}

// TestIndexConcurrentWriters races writers (each its own Index, as separate
// processes have) and a reader over one source's record: every hit must be
// a whole record for the fingerprint looked up, and the file left must be
// one of the records written.
func TestIndexConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	a := stage.Asset{Name: "a", Source: "/no/such/source"}
	reader := openIndex(t, dir)
	const writers, rounds = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			log := new(logRecorder)
			ix, err := stage.OpenIndex(dir, stage.WithIndexLogger(slog.New(log)))
			if err != nil {
				errs <- err
				return
			}
			for i := range rounds {
				sum := byte(w*rounds + i)
				stage.IndexStoreSum(ix, a, sum, int(sum))
			}
			if recs := log.logged(); len(recs) > 0 {
				errs <- fmt.Errorf("writer %d logged: %v", w, recs)
			}
		})
	}
	wg.Go(func() {
		for i := range writers * rounds * 2 {
			sum := byte(i % (writers * rounds))
			if files, d, skipped, ok := stage.IndexLookupSum(reader, a, sum); ok {
				if files != int(sum) || d != digest.Of([]byte{sum}) || !slices.Equal(skipped, []string{"l", "\xff"}) {
					errs <- fmt.Errorf("lookup %d: got files %d digest %s skipped %q", sum, files, d, skipped)
					return
				}
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertOneRecord(t, dir, a, writers*rounds)
}

// assertOneRecord checks that dir holds exactly one file, a's record, for
// one of the fingerprints 0..n-1, and no temporary file.
func assertOneRecord(t *testing.T, dir string, a stage.Asset, n int) {
	t.Helper()
	ix := openIndex(t, dir)
	assert.Equal(t, []string{filepath.Base(stage.IndexRecordPath(ix, a))}, listDir(t, dir))
	hits := 0
	for sum := range n {
		if files, _, _, ok := stage.IndexLookupSum(openIndex(t, dir), a, byte(sum)); ok {
			hits++
			assert.Equal(t, sum, files)
		}
	}
	assert.Equal(t, 1, hits, "the file must hold exactly one whole record")
}

// TestIndexConcurrentProcesses runs writers in separate processes (this
// test binary, re-executed) against one directory.
func TestIndexConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	const procs, rounds = 4, 30
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for p := range procs {
		cmds[p] = exec.Command(exe, "-test.run=^TestIndexWriterProcess$", "-test.count=1")
		cmds[p].Env = append(os.Environ(), "AIRLOCK_TEST_INDEX_DIR="+dir, "AIRLOCK_TEST_INDEX_WRITER="+strconv.Itoa(p), "AIRLOCK_TEST_INDEX_ROUNDS="+strconv.Itoa(rounds))
		outs[p] = new(bytes.Buffer)
		cmds[p].Stdout, cmds[p].Stderr = outs[p], outs[p]
		require.NoError(t, cmds[p].Start())
	}
	for p, c := range cmds {
		assert.NoError(t, c.Wait(), "writer %d: %s", p, outs[p])
	}
	assertOneRecord(t, dir, stage.Asset{Name: "a", Source: "/no/such/source"}, procs*rounds)
}

// TestIndexWriterProcess is TestIndexConcurrentProcesses's writer; it does
// nothing unless started by it.
func TestIndexWriterProcess(t *testing.T) {
	dir := os.Getenv("AIRLOCK_TEST_INDEX_DIR")
	if dir == "" {
		t.Skip("run by TestIndexConcurrentProcesses")
	}
	w, err := strconv.Atoi(os.Getenv("AIRLOCK_TEST_INDEX_WRITER"))
	require.NoError(t, err)
	rounds, err := strconv.Atoi(os.Getenv("AIRLOCK_TEST_INDEX_ROUNDS"))
	require.NoError(t, err)
	log := new(logRecorder)
	ix := openIndex(t, dir, stage.WithIndexLogger(slog.New(log)))
	a := stage.Asset{Name: "a", Source: "/no/such/source"}
	for i := range rounds {
		sum := byte(w*rounds + i)
		stage.IndexStoreSum(ix, a, sum, int(sum))
		files, _, _, ok := stage.IndexLookupSum(openIndex(t, dir), a, byte((w*rounds+i+1)%256))
		if ok { // another writer's whole record
			assert.Equal(t, (w*rounds+i+1)%256, files)
		}
	}
	assert.Empty(t, log.logged())
}

// FuzzIndexRecord checks the strict decoder's property: a file is accepted
// only when it is exactly the encoding of the record decoded from it.
func FuzzIndexRecord(f *testing.F) {
	const key = "k\x00ey"
	for _, skipped := range [][]string{nil, {"l"}, {"a/b", "\xff\xfe"}} {
		b, err := stage.EncodeIndexRecord(key, 7, digest.Of([]byte("m")), 3, 1<<40, skipped)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-2])
		f.Add(bytes.Replace(b, []byte(`"files":3`), []byte(`"files":3,"files":4`), 1))
	}
	f.Add([]byte(`{"schema":"airlock.stage.index.v2"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := stage.RoundTripIndexRecord(data, key)
		if err != nil {
			return
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("accepted %q, which is not the canonical %q", data, out)
		}
	})
}
