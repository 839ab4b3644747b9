package deliverable_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/sandbox"
)

// readerShell is a busyboxuser.ShellRunner that is also a sandbox.FileReader (as
// remote.Host is over SFTP), so that the command takes the host's decision
// and walks the path a second time.
type readerShell struct{ busyboxuser.ShellRunner }

func (r readerShell) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w", p, sandbox.ErrLimit)
	}
	return os.ReadFile(p)
}

// sandboxShells are the POSIX shells the file command must run under.
var sandboxShells = []struct {
	name string
	argv []string
}{
	{"dash", []string{"dash"}},
	{"busybox", []string{"busybox", "sh"}},
}

// TestRemoteReadUnderShells registers a file read by the file command
// under dash and under busybox sh (with busybox's cat, stat and ls), both
// streamed (cat) and read by a FileReader and checked by a second walk;
// and refuses, under each, a link on the path, a missing file and a FIFO,
// with the sentinel the system's shell gives.
func TestRemoteReadUnderShells(t *testing.T) {
	data := []byte("a,b\n1,2\n")
	for _, sh := range sandboxShells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			for _, fr := range []bool{false, true} {
				t.Run(fmt.Sprintf("filereader=%v", fr), func(t *testing.T) {
					f := newFixture(t)
					var r sandbox.Runner = busyboxuser.ShellRunner{Argv: sh.argv, Dir: f.ws}
					if fr {
						r = readerShell{busyboxuser.ShellRunner{Argv: sh.argv, Dir: f.ws}}
					}
					ws := deliverable.RemoteWorkspace(r, f.ws)
					writeFile(t, f.ws, "out/it's $(id).csv", data)
					rec, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("out/it's $(id).csv", "k", data))
					require.NoError(t, err)
					assert.Equal(t, int64(len(data)), rec.ByteSize)
					assert.Len(t, filesUnder(t, f.fs, f.dir, "blobs"), 1)

					require.NoError(t, os.Symlink(filepath.Join(f.ws, "out"), filepath.Join(f.ws, "via")))
					_, err = f.reg.Register(t.Context(), ws, "t", "r", requestFor("via/it's $(id).csv", "k2", data))
					require.ErrorIs(t, err, deliverable.ErrSymlinkDenied)
					assert.Contains(t, err.Error(), "via")
					_, err = f.reg.Register(t.Context(), ws, "t", "r", requestFor("out/missing.csv", "k3", data))
					require.ErrorIs(t, err, fs.ErrNotExist)
					require.NoError(t, exec.Command("mkfifo", filepath.Join(f.ws, "out", "fifo.csv")).Run())
					_, err = f.reg.Register(t.Context(), ws, "t", "r", requestFor("out/fifo.csv", "k4", data))
					require.ErrorIs(t, err, deliverable.ErrPathDenied)
					assert.Contains(t, err.Error(), "fifo")
				})
			}
		})
	}
}

// TestRemoteErrorClasses: each failure kind of a remote read has one
// class. A sandbox that breaks the file protocol (a report that does not
// parse, a record out of bounds, a bad trailer) is deliverable.ErrProtocol
// and sandbox.ErrProtocol, never ErrTransport; a connection cut while the
// file streams, or a report that never arrives, is sandbox.ErrTransport,
// never ErrProtocol.
func TestRemoteErrorClasses(t *testing.T) {
	const content = "hello world"
	good := fmt.Sprintf("1 %d 1234 1700000000.5 1700000000.5", len(content))
	for _, tc := range []struct {
		name   string
		runner func(dir string) sandbox.Runner
		class  error
		not    error
		msg    string
	}{
		{"report does not parse", func(string) sandbox.Runner { return &hostileRunner{header: "airlock-file-v1 fiel " + good + "\n"} },
			sandbox.ErrProtocol, sandbox.ErrTransport, `unexpected report "airlock-file-v1 fiel`},
		{"record out of bounds", func(string) sandbox.Runner { return &hostileRunner{header: "airlock-file-v1 missing 3\n"} },
			sandbox.ErrProtocol, sandbox.ErrTransport, `open "out/r.csv": unexpected report`},
		{"notdir names the leaf", func(string) sandbox.Runner { return &hostileRunner{header: "airlock-file-v1 notdir 2\n"} },
			sandbox.ErrProtocol, sandbox.ErrTransport, `open "out/r.csv": unexpected report`},
		{"trailer does not parse", func(string) sandbox.Runner {
			return &hostileRunner{header: "airlock-file-v1 file " + good + "\n", body: fixed(content), trailer: "airlock-file-end-v1 1 2\n"}
		}, sandbox.ErrProtocol, sandbox.ErrTransport, `read "out/r.csv": unexpected trailer`},
		{"moved without a second walk", func(string) sandbox.Runner {
			return &hostileRunner{header: "airlock-file-v1 file " + good + "\n", body: fixed(content), trailer: "airlock-file-end-v1 moved\n"}
		}, sandbox.ErrProtocol, sandbox.ErrTransport, "but the path was walked once"},
		{"cut while streaming", func(dir string) sandbox.Runner { return cutRunner{sandbox.Local(dir), 4} },
			sandbox.ErrTransport, sandbox.ErrProtocol, "connection reset by peer"},
		{"report never arrives", func(dir string) sandbox.Runner { return sleepRunner{sandbox.Local(dir)} },
			sandbox.ErrTransport, sandbox.ErrProtocol, "control deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, f.ws, "out/r.csv", []byte(content))
			start := time.Now()
			_, err := f.reg.Register(t.Context(), deliverable.RemoteWorkspace(tc.runner(f.ws), f.ws), "t", "r", requestFor("out/r.csv", "k", []byte(content)))
			require.Error(t, err)
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.ErrorIs(t, err, tc.class)
			assert.NotErrorIs(t, err, tc.not)
			if tc.class == sandbox.ErrProtocol {
				assert.ErrorIs(t, err, deliverable.ErrProtocol, "the package's sentinel")
			}
			assert.True(t, strings.Contains(err.Error(), tc.msg), "%q does not say %q", err, tc.msg)
			requireHostError(t, err)
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "blobs"), "nothing stored")
		})
	}
}
