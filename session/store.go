package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/tree"
)

// Store persists v1 records as files in one directory of an [afero.Fs].
//
// A session's record lives at <dir>/<readable>-<16 hex>.json, the same
// collision-resistant name as the session's runtime root (see [Bind]), so it
// depends on the session id only: a record saved under one binding is found,
// and rejected with [ErrDrift], when the same session id is loaded under a
// different binding. Saves are atomic: the record is written to a hidden
// temporary file in the same directory (exclusive create, mode 0600), synced,
// renamed over the final name, and the directory is synced. A failed save
// removes its temporary file and leaves the previous record, if any, intact.
//
// Store does no locking: concurrent saves of one session each publish a
// complete record and the last rename wins.
type Store struct {
	fs  afero.Fs
	dir string
}

// NewStore returns a store that keeps records in dir on fsys. The directory is
// created (mode 0700) on the first Save.
func NewStore(fsys afero.Fs, dir string) *Store {
	return &Store{fs: fsys, dir: dir}
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
// record of r.SessionID. Failures are [*fs.PathError] values naming the
// record's path.
func (s *Store) Save(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("session: save record: %w", err)
	}
	if err := s.usable(); err != nil {
		return err
	}
	data, err := r.Encode()
	if err != nil {
		return err
	}
	name := s.path(r.SessionID)
	fail := func(err error) error {
		return &fs.PathError{Op: "session.Store.Save", Path: name, Err: err}
	}
	notSaved := func(err error) error {
		return fail(fmt.Errorf("record not saved, the previous record is unchanged: %w", err))
	}
	if err := s.fs.MkdirAll(s.dir, 0o700); err != nil {
		return notSaved(fmt.Errorf("create the store directory %q: %w", s.dir, err))
	}
	if err := atomicfile.Write(ctx, s.fs, name, data, 0o600, ""); err != nil {
		return notSaved(err)
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		return fail(fmt.Errorf("record written but the directory sync failed; it may not survive a crash: %w", err))
	}
	return nil
}

func syncDir(fsys afero.Fs, dir string) error {
	d, err := fsys.Open(dir)
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
// errors.Is(err, fs.ErrNotExist). Every failure is a [*fs.PathError] naming
// the record's path; on any failure start a fresh session.
func (s *Store) Load(ctx context.Context, b Binding) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, fmt.Errorf("session: load record: %w", err)
	}
	if err := s.usable(); err != nil {
		return Record{}, err
	}
	if err := b.validate(); err != nil {
		return Record{}, err
	}
	name := s.path(b.SessionID)
	fail := func(err error) (Record, error) {
		return Record{}, &fs.PathError{Op: "session.Store.Load", Path: name, Err: err}
	}
	data, err := readRecordFile(s.fs, name)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("%w: no record for session %q; start a fresh session", fs.ErrNotExist, b.SessionID))
	}
	if err != nil {
		return fail(err)
	}
	r, err := DecodeRecord(data)
	if err != nil {
		return fail(err)
	}
	if err := b.Check(r); err != nil {
		return fail(err)
	}
	return r, nil
}

func readRecordFile(fsys afero.Fs, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	data, err := readRegular(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return data, err
}

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
