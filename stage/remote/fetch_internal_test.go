package remote

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// fakeInfo is one entry a hostile SFTP server lists.
type fakeInfo struct {
	name string
	mode fs.FileMode
	size int64
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return f.size }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Unix(0, 0) }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n+int(off) == len(l) {
		return n, io.EOF
	}
	return n, nil
}

// hostileLister answers Stat with a directory and List with its entries;
// with cut set, it drops the connection instead of answering a List.
type hostileLister struct {
	entries []os.FileInfo
	cut     bool
	drop    func() // set by hostileSFTP
}

func (h *hostileLister) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	switch r.Method {
	case "List":
		if h.cut {
			h.drop()
			return nil, errors.New("gone")
		}
		return listerAt(h.entries), nil
	case "Stat", "Lstat":
		return listerAt{fakeInfo{name: "copy", mode: fs.ModeDir | 0o755}}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// pipeConn is one end of a bidirectional in-process pipe.
type pipeConn struct {
	io.Reader
	io.WriteCloser
	closeRead func() error
}

func (p pipeConn) Close() error {
	err := p.WriteCloser.Close()
	if cerr := p.closeRead(); err == nil {
		err = cerr
	}
	return err
}

// hostileSFTP returns a client of an in-process SFTP server whose listings
// are h's.
func hostileSFTP(t *testing.T, h *hostileLister) *sftp.Client {
	t.Helper()
	cr, sw := io.Pipe() // server -> client
	sr, cw := io.Pipe() // client -> server
	srv := sftp.NewRequestServer(pipeConn{sr, sw, sr.Close}, sftp.Handlers{FileList: h, FileGet: nil, FilePut: nil, FileCmd: nil})
	drop := func() {
		_ = cr.Close() // a pipe's Close never fails
		_ = cw.Close()
	}
	h.drop = drop
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve() }() // ends with the pipes
	c, err := sftp.NewClientPipe(cr, cw)
	require.NoError(t, err)
	t.Cleanup(func() {
		drop() // c.Close waits for its reader, which the pipes end
		_ = c.Close()
		_ = srv.Close()
		wg.Wait()
	})
	return c
}

// TestListCopyErrorClasses: an SFTP listing that breaks the protocol (a
// name that is not a plain name, a negative size; pkg/sftp's client drops
// "." and ".." and takes the base of any other name itself, so "" and "/"
// are what gets through) is sandbox.ErrProtocol
// and never a transport failure; a connection cut during the listing is
// sandbox.ErrTransport and never ErrProtocol.
func TestListCopyErrorClasses(t *testing.T) {
	reg := func(name string, size int64) os.FileInfo { return fakeInfo{name: name, mode: 0o644, size: size} }
	for _, tc := range []struct {
		name    string
		entries []os.FileInfo
		cut     bool
		class   error
		not     error
		msg     string
	}{
		{name: "slash", entries: []os.FileInfo{reg("/", 1)}, class: sandbox.ErrProtocol, not: sandbox.ErrTransport, msg: `lists the name "/" in /s/copy, which is not a plain name`},
		{name: "empty name", entries: []os.FileInfo{reg("", 1)}, class: sandbox.ErrProtocol, not: sandbox.ErrTransport, msg: `lists the name "."`}, // the client's path.Base("")
		{name: "negative size", entries: []os.FileInfo{reg("f", -5)}, class: sandbox.ErrProtocol, not: sandbox.ErrTransport, msg: "lists /s/copy/f with the size -5"},
		{name: "cut connection", cut: true, class: sandbox.ErrTransport, not: sandbox.ErrProtocol, msg: "reading directory /s/copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hostileSFTP(t, &hostileLister{entries: tc.entries, cut: tc.cut})
			_, _, err := listCopy(c, "/s/copy")
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.class)
			assert.NotErrorIs(t, err, tc.not)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}
