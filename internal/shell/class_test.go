package shell

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostFault pins which Runner failures are the host's own: a path error
// anywhere in the chain, or a writer error of the caller's; a connection's
// failure, an errno without a path, a plain error are not.
func TestHostFault(t *testing.T) {
	own := errors.New("the caller's writer failed")
	other := errors.New("another writer's error")
	enospc := &fs.PathError{Op: "write", Path: "/host/out", Err: syscall.ENOSPC}
	for _, c := range []struct {
		name string
		err  error
		w    []error
		want bool
	}{
		{"nil", nil, []error{own}, false},
		{"a path error", enospc, nil, true},
		{"a wrapped path error", fmt.Errorf("sandbox: writing the command's stdout: %w", enospc), nil, true},
		{"a path error in a join", errors.Join(errors.New("x"), enospc), nil, true},
		{"the caller's writer error, wrapped", fmt.Errorf("writing: %w", own), []error{nil, own}, true},
		{"another writer's error", fmt.Errorf("writing: %w", other), []error{own}, false},
		{"no writer failed", errors.New("stream reset"), []error{nil, nil}, false},
		{"a connection reset", &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, nil, false},
		{"an errno alone", syscall.ENOSPC, nil, false},
		{"an unexpected EOF", io.ErrUnexpectedEOF, nil, false},
	} {
		assert.Equal(t, c.want, HostFault(c.err, c.w...), c.name)
	}
}

// TestTrackWriter: a writer's first error is kept and the writes pass on
// unchanged; a file and nil are passed as they are (no tracker).
func TestTrackWriter(t *testing.T) {
	var buf bytes.Buffer
	w, tr := TrackWriter(&buf)
	require.NotNil(t, tr)
	n, err := w.Write([]byte("ok"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, "ok", buf.String())
	assert.NoError(t, tr.Err())

	first, second := errors.New("first"), errors.New("second")
	errs := []error{first, second}
	w, tr = TrackWriter(writerFunc(func([]byte) (int, error) { e := errs[0]; errs = errs[1:]; return 0, e }))
	_, err = w.Write([]byte("a"))
	assert.Same(t, first, err)
	_, err = w.Write([]byte("b"))
	assert.Same(t, second, err)
	assert.Same(t, first, tr.Err())

	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	w, tr = TrackWriter(f)
	assert.Same(t, f, w)
	assert.Nil(t, tr)
	assert.NoError(t, tr.Err(), "a nil tracker has no error")
	w, tr = TrackWriter(nil)
	assert.Nil(t, w)
	assert.Nil(t, tr)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestKeepsClass: the one rule by which a Runner's error is passed on
// rather than marked ErrTransport.
func TestKeepsClass(t *testing.T) {
	own := errors.New("the caller's writer failed")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: reset", ErrTransport), true},
		{fmt.Errorf("%w: bad reply", ErrProtocol), true},
		{fmt.Errorf("refused: %w", ErrBadCommand), true},
		{&fs.PathError{Op: "write", Path: "/host/out", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("copy: %w", own), true},
		{errors.New("ssh: connection lost"), false},
		{syscall.ECONNRESET, false},
	} {
		assert.Equal(t, c.want, KeepsClass(c.err, own), "%v", c.err)
	}
}

// TestReadTracker: a copy through a ReadTracker keeps the source's read
// error (not io.EOF, not the writer's), uses the copy's buffer (no
// WriteTo of an *os.File), and passes every byte read before the error.
func TestReadTracker(t *testing.T) {
	var out bytes.Buffer
	tr := &ReadTracker{R: strings.NewReader("whole")}
	_, err := io.Copy(&out, tr)
	require.NoError(t, err)
	assert.NoError(t, tr.Err, "io.EOF is no error")
	assert.Equal(t, "whole", out.String())

	cut := errors.New("disk read failed")
	out.Reset()
	tr = &ReadTracker{R: io.MultiReader(strings.NewReader("part"), iotest.ErrReader(cut))}
	_, err = io.Copy(&out, tr)
	require.ErrorIs(t, err, cut)
	assert.ErrorIs(t, tr.Err, cut)
	assert.Equal(t, "part", out.String())

	tr = &ReadTracker{R: strings.NewReader("x")}
	_, err = io.Copy(writerFunc(func([]byte) (int, error) { return 0, cut }), tr)
	require.ErrorIs(t, err, cut)
	assert.NoError(t, tr.Err, "the writer's error is not the reader's")

	_, isWriterTo := any(tr).(io.WriterTo)
	assert.False(t, isWriterTo, "io.CopyBuffer must use the buffer it is given")
}
