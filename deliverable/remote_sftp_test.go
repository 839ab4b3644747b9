package deliverable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// sftpHost is a remote.Host whose ReadFile (the sandbox.FileReader through
// which RemoteWorkspace reads over SFTP) is counted, with hooks that run
// before and after the real read: the agent acting while the host reads.
type sftpHost struct {
	*remote.Host
	reads         atomic.Int32
	before, after func()
}

var _ sandbox.FileReader = (*sftpHost)(nil)

func (h *sftpHost) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	h.reads.Add(1)
	if h.before != nil {
		h.before()
	}
	data, err := h.Host.ReadFile(ctx, p, max)
	if h.after != nil {
		h.after()
	}
	return data, err
}

// TestRegisterRejectionsOverRemotetest runs every rule of Register against a
// workspace inside an SSH sandbox (remotetest, read through remote.Host:
// shell checks and SFTP) and pins each outcome: the error class, the
// sentinel, the field and the exact message for the agent, how many SFTP
// reads it cost, and that nothing was stored.
func TestRegisterRejectionsOverRemotetest(t *testing.T) {
	srv := remotetest.NewServer(t)
	testRegisterRejectionsOverSSH(t, srv.Addr(), srv.Config(), srv.Dir(), srv.Execs)
}

// TestRegisterRejectionsOverSSHD runs the same table against a real OpenSSH
// sshd and its internal-sftp (skipped, saying how to install it, when there
// is none).
func TestRegisterRejectionsOverSSHD(t *testing.T) {
	srv := sshdtest.Start(t)
	testRegisterRejectionsOverSSH(t, srv.Addr(), srv.Config(), srv.Dir(), nil)
}

// testRegisterRejectionsOverSSH runs the table over the SSH server at addr,
// whose sandbox directory dir is also this machine's; execs, when not nil,
// counts the server's exec requests.
func testRegisterRejectionsOverSSH(t *testing.T, addr string, cfg remote.Config, dir string, execs func() int64) {
	const tool = deliverable.DefaultToolName
	data := []byte("a,b\n1,2\n")           // out/r.csv, 8 bytes
	secret := []byte("SECRET!\n")          // outside/r.csv: same size, outside the workspace
	other := sum([]byte("something else")) // a wrong sha256
	fix := `pass the file's path relative to the workspace root, such as "out/report.pdf".`
	noLink := "pass the path of the file's real location inside the workspace, with no link in any component."
	changed := tool + `: contentRef "out/r.csv" changed while it was read; register it once it is complete.`

	h, err := remote.Dial(t.Context(), addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	host := &sftpHost{Host: h}

	// Each case gets <dir>/case-N/{ws,outside}; ws holds out/r.csv,
	// link -> out, link.csv -> out/r.csv, escape -> ../outside, and h.csv,
	// a second name of other.csv.
	type dirs struct{ ws, outside string }
	layout := func(t *testing.T, i int) dirs {
		base := filepath.Join(dir, "case-"+strconv.Itoa(i))
		d := dirs{ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
		writeFile(t, d.ws, "out/r.csv", data)
		writeFile(t, d.outside, "r.csv", secret)
		require.NoError(t, os.Symlink("out", filepath.Join(d.ws, "link")))
		require.NoError(t, os.Symlink("out/r.csv", filepath.Join(d.ws, "link.csv")))
		require.NoError(t, os.Symlink("../outside", filepath.Join(d.ws, "escape")))
		require.NoError(t, os.Link(writeFile(t, d.ws, "other.csv", data), filepath.Join(d.ws, "h.csv")))
		return d
	}
	// The agent's moves while the host reads.
	rewriteInPlace := func(t *testing.T, d dirs) {
		p := filepath.Join(d.ws, "out", "r.csv")
		fi, err := os.Stat(p)
		assert.NoError(t, err)
		time.Sleep(20 * time.Millisecond) // a change time the second stat can tell apart
		assert.NoError(t, os.WriteFile(p, []byte("A,B\n1,2\n"), 0o644))
		assert.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	}
	grow := func(t *testing.T, d dirs) {
		w, err := os.OpenFile(filepath.Join(d.ws, "out", "r.csv"), os.O_WRONLY|os.O_APPEND, 0)
		assert.NoError(t, err)
		_, err = w.Write([]byte("3,4\n"))
		assert.NoError(t, errors.Join(err, w.Close()))
	}
	swapDir := func(t *testing.T, d dirs) { // out becomes a link to outside
		assert.NoError(t, os.Rename(filepath.Join(d.ws, "out"), filepath.Join(d.ws, "out.away")))
		assert.NoError(t, os.Symlink("../outside", filepath.Join(d.ws, "out")))
	}
	restoreDir := func(t *testing.T, d dirs) {
		assert.NoError(t, os.Remove(filepath.Join(d.ws, "out")))
		assert.NoError(t, os.Rename(filepath.Join(d.ws, "out.away"), filepath.Join(d.ws, "out")))
	}
	swapLeaf := func(t *testing.T, d dirs) { // out/r.csv becomes a link to outside/r.csv
		assert.NoError(t, os.Rename(filepath.Join(d.ws, "out", "r.csv"), filepath.Join(d.ws, "out", "r.away")))
		assert.NoError(t, os.Symlink("../../outside/r.csv", filepath.Join(d.ws, "out", "r.csv")))
	}
	restoreLeaf := func(t *testing.T, d dirs) {
		assert.NoError(t, os.Remove(filepath.Join(d.ws, "out", "r.csv")))
		assert.NoError(t, os.Rename(filepath.Join(d.ws, "out", "r.away"), filepath.Join(d.ws, "out", "r.csv")))
	}

	const (
		request  = "request" // a *RequestError: message is its Message
		hostSide = "host"    // a *HostError: message is its Error()
	)
	cases := []struct {
		name          string
		ref           string // contentRef; filename is its base name
		mutate        func(*deliverable.Request)
		maxBytes      int64
		root          func(d dirs) string // the workspace root; default d.ws
		before, after func(t *testing.T, d dirs)
		class         string
		want          error
		field         string
		message       string
		reads         int32 // SFTP reads
	}{
		{name: "absolute path", ref: "/etc/passwd", class: request, want: deliverable.ErrPathDenied, field: "contentRef",
			message: tool + `: contentRef "/etc/passwd" is absolute; ` + fix},
		{name: "URL", ref: "sftp://sandbox/out/r.csv", class: request, want: deliverable.ErrPathDenied, field: "contentRef",
			message: tool + `: contentRef "sftp://sandbox/out/r.csv" is a URL or has a scheme; ` + fix},
		{name: "dot-dot", ref: "../outside/r.csv", class: request, want: deliverable.ErrPathDenied, field: "contentRef",
			message: tool + `: contentRef "../outside/r.csv" contains ".."; ` + fix},
		{name: "link in a directory component", ref: "link/r.csv", class: request, want: deliverable.ErrSymlinkDenied, field: "contentRef",
			message: tool + `: contentRef "link/r.csv" goes through a symbolic link; ` + noLink},
		{name: "link leaving the workspace", ref: "escape/r.csv", class: request, want: deliverable.ErrSymlinkDenied, field: "contentRef",
			message: tool + `: contentRef "escape/r.csv" goes through a symbolic link; ` + noLink},
		{name: "link as the file", ref: "link.csv", class: request, want: deliverable.ErrSymlinkDenied, field: "contentRef",
			message: tool + `: contentRef "link.csv" goes through a symbolic link; ` + noLink},
		{name: "hard link", ref: "h.csv", class: request, want: deliverable.ErrHardlinkDenied, field: "contentRef",
			message: tool + `: contentRef "h.csv" has 2 hard links; copy it to a new file and register the copy.`},
		{name: "directory", ref: "out", class: request, want: deliverable.ErrPathDenied, field: "contentRef",
			message: tool + `: contentRef "out" is not a readable regular file; register a regular file, not a directory, device, FIFO or socket.`},
		{name: "missing file", ref: "out/none.csv", class: request, want: fs.ErrNotExist, field: "contentRef",
			message: tool + `: contentRef "out/none.csv" does not exist in the workspace; write the file first, or correct contentRef.`},
		{name: "size mismatch", mutate: func(r *deliverable.Request) { r.ByteSize = 9 }, class: request, want: deliverable.ErrSizeMismatch, field: "byteSize",
			message: tool + ": byteSize is 9 but the file has 8 bytes; recompute byteSize and sha256 from the final file."},
		{name: "hash mismatch", mutate: func(r *deliverable.Request) { r.SHA256 = other }, class: request, want: deliverable.ErrHashMismatch, field: "sha256",
			message: tool + ": sha256 is " + other + " but the file's bytes hash to " + sum(data) + "; recompute sha256 from the final file.", reads: 1},
		{name: "over the size limit", maxBytes: 4, class: request, want: deliverable.ErrSizeDenied, field: "byteSize",
			message: tool + ": byteSize 8 is outside 1..4; only a non-empty file of at most 4 bytes can be registered; pass its exact size in bytes."},
		{name: "rewritten while read", after: rewriteInPlace, class: request, want: deliverable.ErrFileChanged, field: "contentRef",
			message: changed, reads: 1},
		{name: "grows while read: cut off", before: grow, class: request, want: deliverable.ErrFileChanged, field: "contentRef",
			message: changed, reads: 1},
		{name: "directory swapped for a link while read, then restored", before: swapDir, after: restoreDir, class: request, want: deliverable.ErrFileChanged, field: "contentRef",
			message: changed, reads: 1},
		{name: "file swapped for a link while read, then restored", before: swapLeaf, after: restoreLeaf, class: request, want: deliverable.ErrFileChanged, field: "contentRef",
			message: changed, reads: 1},
		{name: "workspace root missing", root: func(d dirs) string { return d.ws + "-missing" }, class: hostSide,
			message: "deliverable: read workspace: the remote workspace root {root} cannot be entered in the sandbox (missing, not a directory, or not searchable); pass RemoteWorkspace the sandbox's workspace directory"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := layout(t, i)
			f := newFixture(t)
			f.reg.MaxBytes = tc.maxBytes
			root := d.ws
			if tc.root != nil {
				root = tc.root(d)
			}
			host.reads.Store(0)
			host.before, host.after = nil, nil
			if tc.before != nil {
				host.before = func() { tc.before(t, d) }
			}
			if tc.after != nil {
				host.after = func() { tc.after(t, d) }
			}
			t.Cleanup(func() { host.before, host.after = nil, nil })
			ref := tc.ref
			if ref == "" {
				ref = "out/r.csv"
			}
			req := requestFor(ref, "k", data)
			req.Filename = path.Base(ref)
			if tc.mutate != nil {
				tc.mutate(&req)
			}

			_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(host, root), "task-1", "run-1", req)
			require.Error(t, err)
			var re *deliverable.RequestError
			switch tc.class {
			case request:
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.message, re.Message)
				assert.Equal(t, tc.field, re.Field)
				require.ErrorIs(t, err, tc.want)
				var pe *fs.PathError
				if tc.field == "contentRef" || tc.field == "byteSize" && tc.want == deliverable.ErrSizeMismatch {
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, ref, pe.Path)
				}
			case hostSide:
				he := requireHostError(t, err)
				assert.Equal(t, strings.ReplaceAll(tc.message, "{root}", root), he.Error())
			}
			assert.Equal(t, tc.reads, host.reads.Load(), "SFTP reads")
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "runs"), "nothing stored")
		})
	}

	t.Run("success read over SFTP, then an idempotent replay", func(t *testing.T) {
		d := layout(t, len(cases))
		f := newFixture(t)
		host.reads.Store(0)
		ws := deliverable.RemoteWorkspace(host, d.ws)
		req := requestFor("out/r.csv", "k", data)
		rc, err := f.reg.Register(t.Context(), ws, "task-1", "run-1", req)
		require.NoError(t, err)
		assert.Equal(t, deliverable.Applied, rc.Disposition)
		assert.Equal(t, sum(data), rc.SHA256)
		assert.Equal(t, int64(len(data)), rc.ByteSize)
		assert.Equal(t, int32(1), host.reads.Load(), "the bytes came over SFTP")
		stored := storeFiles(t, f.fs, f.dir)

		var before int64
		if execs != nil {
			before = execs()
		}
		again, err := f.reg.Register(t.Context(), ws, "task-1", "run-1", req)
		require.NoError(t, err)
		assert.Equal(t, rc, again, "a replay returns the stored receipt")
		if execs != nil {
			assert.Equal(t, before, execs(), "a replay runs nothing in the sandbox")
		}
		assert.Equal(t, int32(1), host.reads.Load(), "a replay reads nothing")
		assert.Equal(t, stored, storeFiles(t, f.fs, f.dir), "a replay writes nothing")
	})

	t.Run("success streamed by the command above the SFTP size", func(t *testing.T) {
		defer deliverable.SetMaxFileReaderBytes(4)()
		d := layout(t, len(cases)+1)
		f := newFixture(t)
		host.reads.Store(0)
		rc, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(host, d.ws), "task-1", "run-1", requestFor("out/r.csv", "k", data))
		require.NoError(t, err)
		assert.Equal(t, deliverable.Applied, rc.Disposition)
		assert.Equal(t, sum(data), rc.SHA256)
		assert.Equal(t, int32(0), host.reads.Load(), "no SFTP read above the size")
	})
}

// readerRunner plays a sandbox whose Runner is also a sandbox.FileReader: the
// command sends header, then reads the host's decision line from stdin and
// answers it with body (on "cat") or extra (on "check") and then trailer.
// ReadFile answers with read.
type readerRunner struct {
	header, trailer string
	body, extra     string
	read            func(p string, max int64) ([]byte, error)

	decision atomic.Value // string
	paths    atomic.Value // string: the last path ReadFile was asked for
	reads    atomic.Int32
}

func (r *readerRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	if _, err := io.WriteString(cmd.Stderr, r.header); err != nil {
		return err
	}
	line, err := bufio.NewReader(cmd.Stdin).ReadString('\n')
	r.decision.Store(strings.TrimSuffix(line, "\n"))
	if err != nil {
		return nil // no decision: the host gave up; the command ends quietly
	}
	out := r.extra
	if line == "cat\n" {
		out = r.body
	}
	if _, err := io.WriteString(cmd.Stdout, out); err != nil {
		return err
	}
	_, err = io.WriteString(cmd.Stderr, r.trailer)
	return err
}

func (r *readerRunner) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	r.reads.Add(1)
	r.paths.Store(p)
	return r.read(p, max)
}

// TestRemoteWorkspaceFileReaderProtocol pins the host's side of the
// FileReader path against a sandbox that answers however it likes: what
// the host decides, what it accepts, and which error class each failure is.
func TestRemoteWorkspaceFileReaderProtocol(t *testing.T) {
	const content = "hello world"
	good := fmt.Sprintf("1 %d 1234 1700000000.5 1700000000.5", len(content))
	head := "airlock-file-v1 file " + good + "\n"
	tail := "airlock-file-end-v1 " + good + "\n"
	serve := func(data string, err error) func(string, int64) ([]byte, error) {
		return func(string, int64) ([]byte, error) { return []byte(data), err }
	}
	const (
		request  = "request"
		hostSide = "host"
	)
	cases := []struct {
		name     string
		r        *readerRunner
		decision string // what the host told the command
		reads    int32
		want     error // nil: stored
		class    string
	}{
		{"read over the FileReader, checked by the command",
			&readerRunner{header: head, trailer: tail, read: serve(content, nil)}, "check", 1, nil, ""},
		{"FileReader fails: the command streams the file",
			&readerRunner{header: head, body: content, trailer: tail, read: serve("", fmt.Errorf("%w: no sftp subsystem", sandbox.ErrTransport))}, "cat", 1, nil, ""},
		{"FileReader finds no regular file: the command streams it",
			&readerRunner{header: head, body: content, trailer: tail, read: serve("", fs.ErrNotExist)}, "cat", 1, nil, ""},
		{"stat without change times (ls only): streamed, no FileReader",
			&readerRunner{header: fmt.Sprintf("airlock-file-v1 file 1 %d 1234 Jan_1_2025 0\n", len(content)), body: content,
				trailer: fmt.Sprintf("airlock-file-end-v1 1 %d 1234 Jan_1_2025 0\n", len(content)), read: serve(content, nil)}, "cat", 0, nil, ""},
		{"FileReader serves other bytes: hashed on the host",
			&readerRunner{header: head, trailer: tail, read: serve("HELLO WORLD", nil)}, "check", 1, deliverable.ErrHashMismatch, request},
		{"FileReader serves fewer bytes",
			&readerRunner{header: head, trailer: tail, read: serve("hello", nil)}, "", 1, deliverable.ErrFileChanged, request},
		{"FileReader serves more bytes than asked",
			&readerRunner{header: head, trailer: tail, read: serve(content+"!", nil)}, "", 1, deliverable.ErrFileChanged, request},
		{"FileReader reports the limit",
			&readerRunner{header: head, trailer: tail, read: serve("", fmt.Errorf("%w: too big", stage.ErrLimit))}, "", 1, deliverable.ErrFileChanged, request},
		{"command reports the path moved",
			&readerRunner{header: head, trailer: "airlock-file-end-v1 moved\n", read: serve(content, nil)}, "check", 1, deliverable.ErrFileChanged, request},
		{"command reports another stat",
			&readerRunner{header: head, trailer: "airlock-file-end-v1 1 11 1234 1700000001.5 1700000001.5\n", read: serve(content, nil)}, "check", 1, deliverable.ErrFileChanged, request},
		{"command sends content after the check",
			&readerRunner{header: head, extra: "x", trailer: tail, read: serve(content, nil)}, "check", 1, deliverable.ErrFileChanged, request},
		{"command sends no trailer after the check",
			&readerRunner{header: head, read: serve(content, nil)}, "check", 1, deliverable.ErrProtocol, hostSide},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(tc.r, "/sandbox/ws"), "t", "r", requestFor("out/r.csv", "k", []byte(content)))
			assert.Equal(t, tc.reads, tc.r.reads.Load(), "FileReader calls")
			if tc.reads > 0 {
				assert.Equal(t, "/sandbox/ws/out/r.csv", tc.r.paths.Load())
			}
			assert.Equal(t, tc.decision, tc.r.decision.Load(), "the host's decision")
			if tc.want == nil {
				require.NoError(t, err)
				assert.Len(t, filesUnder(t, f.fs, f.dir, "blobs"), 1)
				return
			}
			require.ErrorIs(t, err, tc.want)
			if tc.want == deliverable.ErrProtocol {
				require.ErrorIs(t, err, sandbox.ErrProtocol, "deliverable.ErrProtocol is the protocol class")
				assert.NotErrorIs(t, err, sandbox.ErrTransport)
			} else {
				assert.NotErrorIs(t, err, sandbox.ErrProtocol, "only a broken protocol is ErrProtocol")
			}
			var re *deliverable.RequestError
			switch tc.class {
			case request:
				require.ErrorAs(t, err, &re)
			case hostSide:
				requireHostError(t, err)
			}
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
		})
	}
}

// TestRemoteWorkspaceFileReaderNeedsAnAbsoluteRoot: a root relative to the
// Runner's directory may resolve differently for the FileReader, so the
// command streams the file.
func TestRemoteWorkspaceFileReaderNeedsAnAbsoluteRoot(t *testing.T) {
	const content = "hello world"
	good := fmt.Sprintf("1 %d 1234 1700000000.5 1700000000.5", len(content))
	for _, root := range []string{"", "ws", "/sandbox/../ws", "/sandbox/ws/"} {
		h := &hostileRunner{header: "airlock-file-v1 file " + good + "\n", body: fixed(content), trailer: "airlock-file-end-v1 " + good + "\n"}
		r := struct {
			*hostileRunner
			sandbox.FileReader
		}{h, &readerRunner{read: func(string, int64) ([]byte, error) {
			t.Errorf("root %q: the FileReader was used", root)
			return nil, errors.New("unused")
		}}}
		f := newFixture(t)
		_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(r, root), "t", "r", requestFor("r.csv", "k", []byte(content)))
		require.NoError(t, err, root)
	}
}
