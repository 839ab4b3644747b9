package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/tree"
)

// Store persists session records ([Record]: which binding a provider
// session was made under, and the ids to resume it) as files in one
// directory of an [afero.Fs]. It is not deliverable.Store, which keeps the
// files an agent delivers (attachments, their content and receipts). The
// two keep the same short name because each is the store of its own
// package and is always written package-qualified (session.Store,
// deliverable.Store) at the call site, where the package says which one it
// is; a host that uses both reads them apart without a longer name.
//
// A session's record lives at <dir>/<readable>-<16 hex>.json, the same
// collision-resistant name as the session's SessionDir (see [Bind]), so it
// depends on the session id only: a record saved under one binding is found,
// and rejected with [ErrDrift], when the same session id is loaded under a
// different binding. Saves are atomic: the record is written to a hidden
// temporary file in the same directory (exclusive create, mode 0600), synced,
// renamed over the final name, and the directory is synced. A failed save
// removes its temporary file and leaves the previous record, if any, intact;
// the temporary files of a record's saves whose writers were killed go at
// its next save, once ten minutes old.
//
// Store does no locking: concurrent saves of one session each publish a
// complete record and the last rename wins.
type Store struct {
	fs  afero.Fs
	dir string
}

// NewStore returns a store that keeps records in dir on fsys. The directory is
// created (mode 0700) on the first Save. A host keeping its records on its
// own disk calls [OpenStore]; NewStore serves tests and other file systems.
func NewStore(fsys afero.Fs, dir string) *Store {
	return &Store{fs: fsys, dir: dir}
}

// OpenStore returns a store that keeps records in the host directory dir,
// on the operating system's file system (NewStore(afero.NewOsFs(), dir)),
// and creates dir now as the package creates every state directory (see
// the package documentation): with its missing parents, mode 0700; an
// existing directory is used as it is, and a dangling link is not
// followed, and a filesystem root is refused (ErrInvalidStateDir), as Bind
// refuses it. Errors are [*fs.PathError] values naming dir. Any directory
// of the host's will do; the examples keep it beside the sessions' own
// directories, as <Config.StateDir>/sessions.
func OpenStore(dir string) (*Store, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, &fs.PathError{Op: "session.OpenStore", Path: dir, Err: errors.New("the directory is blank; pass the directory that keeps the session records")}
	}
	// Bind's rule for its StateDir: created with its parents through an
	// os.Root, a dangling link never followed, a filesystem root refused.
	if _, err := stateDir(dir); err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, &fs.PathError{Op: "session.OpenStore", Path: dir, Err: pe.Err}
		}
		return nil, &fs.PathError{Op: "session.OpenStore", Path: dir, Err: err}
	}
	return NewStore(afero.NewOsFs(), dir), nil
}

func (s *Store) usable() error {
	if s == nil || s.fs == nil {
		return errors.New("session: store has no file system; create it with NewStore")
	}
	if s.dir == "" {
		return errors.New("session: store directory is empty; pass a directory to NewStore")
	}
	return nil
}

// path returns the record file for a session id.
func (s *Store) path(sessionID string) string {
	return filepath.Join(s.dir, label(sessionID)+".json")
}

// Save validates and encodes r ([Record.Encode]) and atomically replaces the
// record of r.SessionID. Failures are [*fs.PathError] values (Op
// "session.Store.Save") naming the record's path, the one r.SessionID's
// record has or would have, wrapping what went wrong: a cancelled ctx, an
// invalid record ([ErrUnsupportedSchema], [ErrMalformedRecord]; nothing is
// written), or the I/O error. Only an unusable Store (nil, or without a
// file system or directory), which has no path, fails otherwise.
func (s *Store) Save(ctx context.Context, r Record) error {
	if err := s.usable(); err != nil {
		return err
	}
	name := s.path(r.SessionID)
	fail := func(err error) error {
		return &fs.PathError{Op: "session.Store.Save", Path: name, Err: err}
	}
	notSaved := func(err error) error {
		return fail(fmt.Errorf("record not saved, the previous record is unchanged: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return notSaved(err)
	}
	data, err := r.Encode()
	if err != nil {
		return notSaved(fmt.Errorf("%w; save a record made by Binding.NewRecord with every id set", err))
	}
	if err := s.fs.MkdirAll(s.dir, 0o700); err != nil {
		return notSaved(fmt.Errorf("create the store directory %q: %w", s.dir, err))
	}
	if err := s.clearDir(name); err != nil {
		return fail(err)
	}
	if err := atomicfile.Write(ctx, s.fs, name, data, 0o600, ""); err != nil {
		return notSaved(err)
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		return fail(fmt.Errorf("record written but the directory sync failed; it may not survive a crash: %w", err))
	}
	s.sweepTemps(name)
	return nil
}

// clearDir makes room for the record at name when a directory stands
// there (Resume answers it Undecodable, and a new record replaces it): an
// empty one is removed; one that holds entries is not the store's to
// delete, and the error says so.
func (s *Store) clearDir(name string) error {
	fi, err := lstat(s.fs, name)
	if err != nil || !fi.IsDir() {
		return nil // nothing, or a file the rename replaces
	}
	// Not every afero.Fs refuses to remove a directory that holds entries
	// (MemMapFs does not): look first.
	ents, err := readDir(s.fs, name)
	switch {
	case err != nil:
		return fmt.Errorf("record not saved: a directory stands at the record's path and cannot be read (%w): move it away and save again", err)
	case len(ents) > 0:
		return errors.New("record not saved: a directory that holds entries stands at the record's path; it is not the store's to empty: move it away and save again")
	}
	if err := s.fs.Remove(name); err != nil {
		return fmt.Errorf("record not saved: a directory stands at the record's path and could not be removed (%w): move it away and save again", err)
	}
	return nil
}

// staleTemp is the age past which a temporary file of a record's save
// belongs to a writer that was killed (a save takes milliseconds).
const staleTemp = 10 * time.Minute

// sweepTemps removes the temporary files of saves of the record at name
// that writers killed mid-save left (".<name>.tmp-<random>", regular files
// older than staleTemp). Failures are ignored: the next save tries again.
func (s *Store) sweepTemps(name string) {
	ents, err := readDir(s.fs, s.dir)
	if err != nil {
		return
	}
	prefix := "." + filepath.Base(name) + ".tmp-"
	for _, fi := range ents {
		if strings.HasPrefix(fi.Name(), prefix) && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleTemp {
			_ = s.fs.Remove(filepath.Join(s.dir, fi.Name())) // the next save retries
		}
	}
}

// readDir lists dir, opened without blocking ([openReadFlags]).
func readDir(fsys afero.Fs, dir string) ([]fs.FileInfo, error) {
	d, err := fsys.OpenFile(dir, openReadFlags, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdir(-1)
}

// lstat is fsys's Lstat where it has one, else its Stat.
func lstat(fsys afero.Fs, name string) (fs.FileInfo, error) {
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return fsys.Stat(name)
}

// openReadFlags opens a file for reading without waiting: with O_NONBLOCK,
// open(2) of a FIFO returns at once instead of blocking until a writer
// comes (which no context can interrupt), so the caller can refuse what
// the handle's Stat says is not a regular file. Reads of a regular file or
// a directory ignore the flag. afero.OsFs passes the flags to os.OpenFile;
// afero.MemMapFs, which has no FIFOs, ignores O_NONBLOCK (for any flags
// but a bare O_RDONLY it returns a handle that could also write, which is
// only read here).
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK

// syncDir fsyncs the directory dir, opened without blocking
// ([openReadFlags]).
func syncDir(fsys afero.Fs, dir string) error {
	d, err := fsys.OpenFile(dir, openReadFlags, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Load reads, strictly decodes ([DecodeRecord]) and checks ([Binding.Check])
// the record of b's session. When there is none the error satisfies
// errors.Is(err, fs.ErrNotExist). Every failure to read, decode or check
// the record is a [*fs.PathError] naming the record's path; a cancelled
// ctx, an unusable Store and a binding not made by [Bind]
// ([ErrInvalidBinding]) fail before the record is opened, as they do in
// [Store.Resume]. A record path that is not a regular file (a directory, a
// FIFO, a device) is refused with [ErrMalformedRecord] without waiting on
// it. On any failure start a fresh session. [Store.Resume] gives the same
// answer with the reasons to start fresh told apart from real failures.
func (s *Store) Load(ctx context.Context, b Binding) (Record, error) {
	r, fresh, err := s.load(ctx, b)
	if err != nil {
		return Record{}, err
	}
	if fresh != nil {
		return Record{}, fresh.Err
	}
	return r, nil
}

// FreshReason says why a session must start fresh.
type FreshReason string

// The reasons [Store.Resume] gives for starting fresh.
const (
	// NoRecord: the store holds no record for the session id.
	NoRecord FreshReason = "no_record"
	// Drifted: the record was saved under a different binding of the same
	// session id, or is a [SchemaV1] record, which cannot prove the skill
	// set; [StartFresh.Fields] names the fields that differ (skills_digest
	// for a v1 record).
	Drifted FreshReason = "drift"
	// Undecodable: the record is not a valid record: another or no
	// schema, an unknown field, malformed, too large, or not a regular
	// file. Saving a new record replaces it (a directory there only when
	// it is empty: Save refuses to delete one that holds entries, and
	// says so).
	Undecodable FreshReason = "undecodable"
)

// StartFresh is [Store.Resume]'s answer when the session must not be
// resumed: start a fresh provider session (and save its record).
type StartFresh struct {
	Reason FreshReason // NoRecord, Drifted or Undecodable
	// Fields, for Drifted, lists the drifted fields as [DriftError.Fields] does.
	Fields []string
	// Err is what was found, for logs: an [*fs.PathError] naming the record
	// file that wraps fs.ErrNotExist, a [*DriftError], or the decode error
	// ([ErrUnsupportedSchema], [ErrUnknownField], [ErrMalformedRecord]).
	Err error
}

// Resumption is what [Store.Resume] decides: resume Record, or start fresh
// for the reason in Fresh.
type Resumption struct {
	Record Record      // the record to resume; set exactly when Fresh is nil
	Fresh  *StartFresh // nil: resume Record
}

// Resume says whether b's session can be resumed: it loads, strictly
// decodes and checks the session's record as [Store.Load] does and returns
// the record, or a [StartFresh] with the reason: [NoRecord], [Drifted] (with
// the fields) or [Undecodable]. Those are answers, not errors. The error is
// for real failures only, and then nothing is decided: a cancelled ctx, an
// unusable Store, a binding not made by [Bind] or changed after it
// ([ErrInvalidBinding]), or a record file that cannot be opened or read
// ([*fs.PathError]). A record file that is not a regular file (a
// directory, a FIFO, a device) is [Undecodable]; it is opened without
// blocking, so a FIFO never hangs the call.
func (s *Store) Resume(ctx context.Context, b Binding) (Resumption, error) {
	r, fresh, err := s.load(ctx, b)
	if err != nil {
		return Resumption{}, err
	}
	if fresh != nil {
		return Resumption{Fresh: fresh}, nil
	}
	return Resumption{Record: r}, nil
}

// load is Load and Resume: the record, or why to start fresh, or a failure.
func (s *Store) load(ctx context.Context, b Binding) (Record, *StartFresh, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, nil, fmt.Errorf("session: load record: %w", err)
	}
	if err := s.usable(); err != nil {
		return Record{}, nil, err
	}
	if err := b.validate(); err != nil {
		return Record{}, nil, err
	}
	name := s.path(b.SessionID)
	pathErr := func(err error) error {
		return &fs.PathError{Op: "session.Store.Load", Path: name, Err: err}
	}
	data, err := readRecordFile(s.fs, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Record{}, &StartFresh{Reason: NoRecord,
			Err: pathErr(fmt.Errorf("%w: no record for session %q; start a fresh session", fs.ErrNotExist, b.SessionID))}, nil
	case errors.Is(err, ErrMalformedRecord):
		return Record{}, &StartFresh{Reason: Undecodable, Err: pathErr(err)}, nil
	case err != nil:
		return Record{}, nil, pathErr(err)
	}
	r, err := DecodeRecord(data)
	if err != nil {
		return Record{}, &StartFresh{Reason: Undecodable, Err: pathErr(err)}, nil
	}
	if err := b.Check(r); err != nil {
		var d *DriftError
		if errors.As(err, &d) {
			return Record{}, &StartFresh{Reason: Drifted, Fields: d.Fields, Err: pathErr(err)}, nil
		}
		return Record{}, nil, pathErr(err)
	}
	return r, nil, nil
}

// readRecordFile reads the record file name: opened without blocking
// ([openReadFlags]), so that a FIFO or device at its path is refused as
// not a regular file ([ErrMalformedRecord]) instead of hanging the call,
// and read only when the opened handle is a regular file.
func readRecordFile(fsys afero.Fs, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, openReadFlags, 0)
	if err != nil {
		return nil, err
	}
	data, err := readRegular(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return data, err
}

// readRegular reads at most maxRecordSize+1 bytes of f, after checking
// with f's own Stat (not the path's, which may have changed since the
// open) that it is a regular file.
func readRegular(f afero.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the record is a %s, not a regular file; remove it and start a fresh session", ErrMalformedRecord, tree.Kind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return data, nil
}
