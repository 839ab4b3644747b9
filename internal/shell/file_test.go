package shell

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzFileReport checks the parser of the file command's first report:
// what it accepts re-serializes to exactly its input, names a component
// in range (notdir: never the leaf), a known type, and a stat of decimal
// links and size; what it refuses is a protocol error.
func FuzzFileReport(f *testing.F) {
	for _, s := range []string{
		"airlock-file-v1 file 1 11 1234 1700000000.5 1700000000.5", "airlock-file-v1 file 1 -11 1 2 3",
		"airlock-file-v1 link 2", "airlock-file-v1 notdir 3", "airlock-file-v1 missing 0", "airlock-file-v1 type door",
		"airlock-file-v1 type fifo", "airlock-file-v1 root", "airlock-file-v1 nostat x", "hello",
	} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, line string, n int) {
		if n < 1 || n > 64 {
			return
		}
		r, err := ParseFileReport(line, n)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("a refused report is not a protocol error: %v", err)
			}
			return
		}
		var again string
		switch r.Kind {
		case FileOK:
			if r.Stat.Size < 0 || r.Stat.Sig == "" || strings.Trim(strings.Fields(r.Stat.Sig)[1], "0123456789") != "" {
				t.Fatalf("accepted stat %+v", r.Stat)
			}
			again = FileHeader + " file " + r.Stat.Sig
		case FileLink, FileMissing, FileChanged, FileNotDir:
			last := n
			if r.Kind == FileNotDir {
				last = n - 1
			}
			if r.Component < 1 || r.Component > last {
				t.Fatalf("accepted component %d of %d for %s", r.Component, n, r.Kind)
			}
			again = fmt.Sprintf("%s %s %d", FileHeader, r.Kind, r.Component)
		case FileType:
			if !strings.Contains(" directory fifo socket device other ", " "+r.Type+" ") {
				t.Fatalf("accepted type %q", r.Type)
			}
			again = FileHeader + " type " + r.Type
		case FileUnreadable, FileRoot, FileNoStat:
			again = FileHeader + " " + r.Kind
		default:
			t.Fatalf("accepted kind %q", r.Kind)
		}
		if again != line {
			t.Fatalf("accepted %q, which reads back as %q", line, again)
		}
	})
}

// FuzzFileTrailer checks the trailer parser the same way.
func FuzzFileTrailer(f *testing.F) {
	for _, s := range []string{"airlock-file-end-v1 1 11 1234 1700000000.5 1700000000.5", "airlock-file-end-v1 gone",
		"airlock-file-end-v1 moved", "airlock-file-end-v1 1 2", "bye"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseFileTrailer(line)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("a refused trailer is not a protocol error: %v", err)
			}
			return
		}
		again := FileTrailer + " " + e.Kind
		if e.Kind == EndStat {
			again = FileTrailer + " " + e.Stat.Sig
		}
		if again != line {
			t.Fatalf("accepted %q, which reads back as %q", line, again)
		}
	})
}

// TestReportsBounded: the collector keeps at most its limit, says so, and
// never fails a write (so a Runner's copy of stderr goes on).
func TestReportsBounded(t *testing.T) {
	r := NewReports(16)
	n, err := r.Write([]byte("airlock-file-v1 file 1 2 3 4 5\n"))
	if err != nil || n != 31 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	select {
	case <-r.First():
	default:
		t.Fatal("the limit did not signal")
	}
	lines, extra := r.Lines()
	if len(lines) != 0 || !extra {
		t.Fatalf("Lines = %q, %v; want none and extra", lines, extra)
	}
}

// TestReportsDropNoise: what a sandbox's environment writes on stderr
// around the file command's reports (a login shell's rc files, a tool's
// warning — seen: pyenv's rehash failing in a concurrent shell) is not a
// report and does not break the protocol; the reports still arrive whole.
func TestReportsDropNoise(t *testing.T) {
	r := NewReports(1 << 10)
	noise := "rm: cannot remove '/root/.pyenv/shims/tmp.x': No such file or directory\n" + strings.Repeat("x", 4<<10) + "\n"
	for _, chunk := range []string{noise[:7], noise[7:], "airlock-fi", "le-v1 file 1 5 sig\n", "warning\n", "airlock-file-end-v1 gone\n"} {
		_, err := r.Write([]byte(chunk))
		require.NoError(t, err)
	}
	select {
	case <-r.First():
	default:
		t.Fatal("the first report is complete: First must be closed")
	}
	lines, extra := r.Lines()
	assert.Equal(t, []string{"airlock-file-v1 file 1 5 sig", "airlock-file-end-v1 gone"}, lines)
	assert.False(t, extra, "noise is not extra")
}
