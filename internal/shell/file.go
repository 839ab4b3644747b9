package shell

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The file protocol (airlock-file-v1) of package deliverable: one command
// opens one file of a sandbox's workspace, reports it on stderr and streams
// it on stdout (see FileScript).
const (
	FileHeader     = "airlock-file-v1"     // starts the command's first report
	FileTrailer    = "airlock-file-end-v1" // starts its second (last) report
	MaxFileReports = 1024                  // bytes of stderr the host keeps: the two report lines
)

// fileScript is the fixed part of FileScript's command. Every report goes
// to the original stderr (fd 3); the tools' own diagnostics are discarded
// so they cannot corrupt the reports.
//
// With ask=1 (the host can read the file itself) the command reports the
// file, then reads the host's decision from stdin: "cat" streams the file
// as without ask; "check" means the host has read the file itself (through
// a reader that follows links) and asks the command to walk the path again
// from the root and report the file's state. The walk records every
// directory's inode and change time (dirs); the second walk must find the
// same physical path, no link, and the same directories, or the trailer
// says "moved".
const fileScript = `exec 3>&2 2>/dev/null
set -f
LC_ALL=C
export LC_ALL
pass=1
say() { printf '` + FileHeader + ` %s\n' "$*" >&3; }
bad() {
	if [ "$pass" = 2 ]; then printf '` + FileTrailer + ` moved\n' >&3; exit 0; fi
	say "$@"; exit 0
}
ok() { case $1 in ''|*[!0-9.\ ]*) return 1;; esac; set -- $1; [ $# -eq 5 ]; }
st() {
	for fmt in '%h %s %i %.9Y %.9Z' '%h %s %i %Y %Z'; do
		s=$(stat -c "$fmt" "$1") && ok "$s" && { printf '%s\n' "$s"; return 0; }
	done
	s=$(stat -f '%l %z %i %m %c' "$1") && ok "$s" && { printf '%s\n' "$s"; return 0; }
	set -- $(ls -lnid "$1") && [ $# -ge 9 ] && printf '%s %s %s %s_%s_%s 0\n' "$3" "$6" "$1" "$7" "$8" "$9"
}
track() {
	[ "$ask" = 1 ] || return 0
	d=$(st .) || bad nostat
	set -- $d
	dirs="$dirs $3:$5"
}
step() {
	if [ -L "./$2" ]; then bad link "$1"; fi
	if [ ! -e "./$2" ]; then bad missing "$1"; fi
	if [ ! -d "./$2" ]; then bad notdir "$1"; fi
	cd -P "./$2" || bad missing "$1"
	want=$want/$2
	[ "$(pwd -P)" = "$want" ] || bad changed "$1"
	track
}
leaf() {
	f=./$2
	if [ -L "$f" ]; then say link "$1"; exit 0; fi
	if [ ! -e "$f" ]; then say missing "$1"; exit 0; fi
	if [ -d "$f" ]; then say type directory; exit 0; fi
	if [ -p "$f" ]; then say type fifo; exit 0; fi
	if [ -S "$f" ]; then say type socket; exit 0; fi
	if [ -b "$f" ] || [ -c "$f" ]; then say type device; exit 0; fi
	if [ ! -f "$f" ]; then say type other; exit 0; fi
	if [ ! -r "$f" ]; then say unreadable; exit 0; fi
	a=$(st "$f") && [ -n "$a" ] || { if [ -e "$f" ]; then say nostat; else say changed "$1"; fi; exit 0; }
	say file $a
	how=cat
	if [ "$ask" = 1 ]; then IFS= read -r how || exit 0; fi
	case $how in
	cat)
		# Not a regular file any more (a FIFO would hold cat's open until
		# a writer came): no content, and the trailer tells the change.
		if [ -f "$f" ] && [ ! -L "$f" ]; then cat "$f" || { [ -e "$f" ] && exit 1; }; fi
		;;
	check)
		d1=$dirs w1=$want pass=2
		walk
		[ "$dirs" = "$d1" ] && [ "$want" = "$w1" ] || bad
		;;
	*) exit 0 ;;
	esac
	b=$(st "$f") || b=gone
	if [ -L "$f" ]; then b=link; fi
	printf '` + FileTrailer + ` %s\n' "$b" >&3
	exit 0
}
`

// FileScript returns the one command that opens the file whose path
// components (at least one, each a plain name) are parts, below root
// (an absolute sandbox path, or one relative to the command's working
// directory; "" is that directory). The command:
//
//  1. enters root, then walks the path one component at a time, refusing a
//     symbolic link ([ -L ]) or a non-directory ([ -d ]) before entering it
//     and checking with pwd -P that it arrived where it meant to;
//  2. refuses a leaf that is a link or not a readable regular file;
//  3. reports the file's link count, size, inode and modification and change
//     times (stat -c, stat -f or ls -lnid, whichever works) on stderr
//     (FileHeader; "changed" when the file is gone by then), then streams
//     the bytes with cat on stdout;
//  4. stats the file again and reports it (FileTrailer), so the host can
//     tell a file that changed while it was read ("gone" also when cat
//     failed because the file went; a cat that failed on a file still
//     there exits 1). A leaf that is no longer a regular file when cat
//     would start (a FIFO swapped in, whose open would wait for a writer)
//     is not read: the trailer reports what is there. A swap in the
//     instant between that test and cat's open is not covered: the read
//     then waits for the caller's context.
//
// With ask, step 3 stops after the report and the command reads one
// decision line from stdin: "cat" goes on as above; "check" walks the path
// again from root as in step 1 (recording each directory's inode and
// change time on both walks) and reports the file as in step 4, or
// "moved" when the walks differ. ParseFileReport and ParseFileTrailer read
// the two reports. It needs POSIX sh, cat, and stat or ls.
func FileScript(root string, parts []string, ask bool) string {
	switch {
	case root == "":
		root = "."
	case !strings.HasPrefix(root, "/"):
		root = "./" + root // never an option to cd
	}
	var b strings.Builder
	b.WriteString(fileScript)
	if ask {
		b.WriteString("ask=1\n")
	}
	fmt.Fprintf(&b, "walk() {\ncd -P %s || bad root\nwant=$(pwd -P) || bad root\n[ \"$want\" = / ] && want=\ndirs=\ntrack\n", Quote(root))
	for i, p := range parts[:len(parts)-1] {
		fmt.Fprintf(&b, "step %d %s\n", i+1, Quote(p))
	}
	fmt.Fprintf(&b, "}\nwalk\nleaf %d %s\n", len(parts), Quote(parts[len(parts)-1]))
	return b.String()
}

// FileStat is a file as the command's stat reported it.
type FileStat struct {
	Links uint64 // link count
	Size  int64  // bytes
	Sig   string // the whole report: links, size, inode, modification and change times
}

// ChangeTime reports whether the stat came with a change time (stat(1));
// ls reports none ("0"), so a file swapped and restored between two stats
// may go unseen.
func (s FileStat) ChangeTime() bool {
	f := strings.Fields(s.Sig)
	return len(f) == 5 && f[4] != "0"
}

// The kinds of the first report (FileReport.Kind).
const (
	FileOK         = "file"       // a readable regular file: Stat
	FileLink       = "link"       // Component is a symbolic link
	FileMissing    = "missing"    // Component does not exist
	FileNotDir     = "notdir"     // Component, not the leaf, is not a directory
	FileChanged    = "changed"    // Component changed while the path was walked
	FileType       = "type"       // the leaf is not a regular file: Type
	FileUnreadable = "unreadable" // the leaf is not readable
	FileRoot       = "root"       // the root cannot be entered
	FileNoStat     = "nostat"     // the sandbox has neither stat nor ls
)

// FileReport is the command's first report, parsed.
type FileReport struct {
	Kind      string   // one of the kinds above
	Component int      // link, missing, notdir, changed: the 1-based index of the path component
	Type      string   // type: "directory", "fifo", "socket", "device" or "other"
	Stat      FileStat // file
}

// ParseFileReport reads the command's first report for a path of n
// components. A line that is not one of the reports the command writes,
// or names a component out of range (or the leaf as not a directory), is
// a protocol error (ErrProtocol).
func ParseFileReport(line string, n int) (FileReport, error) {
	bad := func() (FileReport, error) {
		return FileReport{}, protocolf("unexpected report %q", Truncate(line, 200))
	}
	rest, ok := strings.CutPrefix(line, FileHeader+" ")
	if !ok {
		return bad()
	}
	f := strings.Split(rest, " ")
	r := FileReport{Kind: f[0]}
	switch r.Kind {
	case FileOK:
		st, ok := ParseFileStat(strings.Join(f[1:], " "))
		if !ok {
			return bad()
		}
		r.Stat = st
		return r, nil
	case FileLink, FileMissing, FileChanged, FileNotDir:
		last := n
		if r.Kind == FileNotDir {
			last = n - 1 // the leaf is refused by its type
		}
		if len(f) != 2 || !isDigits(f[1]) {
			return bad()
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 1 || i > last {
			return bad()
		}
		r.Component = i
		return r, nil
	case FileType:
		if len(f) == 2 && strings.Contains(" directory fifo socket device other ", " "+f[1]+" ") {
			r.Type = f[1]
			return r, nil
		}
	case FileUnreadable, FileRoot, FileNoStat:
		if len(f) == 1 {
			return r, nil
		}
	}
	return bad()
}

// The kinds of the trailer (FileEnd.Kind).
const (
	EndStat  = "stat"  // the file's second stat: Stat
	EndGone  = "gone"  // the file was removed
	EndLink  = "link"  // the file was replaced by a symbolic link
	EndMoved = "moved" // the second walk found another path (ask's check)
)

// FileEnd is the command's trailer, parsed.
type FileEnd struct {
	Kind string   // one of the kinds above
	Stat FileStat // stat
}

// ParseFileTrailer reads the command's trailer; anything else than one of
// the trailers the command writes is a protocol error (ErrProtocol).
func ParseFileTrailer(line string) (FileEnd, error) {
	after, ok := strings.CutPrefix(line, FileTrailer+" ")
	switch {
	case !ok:
	case after == EndGone, after == EndLink, after == EndMoved:
		return FileEnd{Kind: after}, nil
	default:
		if st, ok := ParseFileStat(after); ok {
			return FileEnd{Kind: EndStat, Stat: st}, nil
		}
	}
	return FileEnd{}, protocolf("unexpected trailer %q", Truncate(line, 200))
}

// ParseFileStat reads "<links> <size> <inode> <mtime> <ctime>". Every
// token is 1 to 40 bytes of [0-9A-Za-z:._-]; links and size are decimal
// and in range.
func ParseFileStat(s string) (FileStat, bool) {
	f := strings.Split(s, " ")
	if len(f) != 5 {
		return FileStat{}, false
	}
	for _, t := range f {
		if len(t) == 0 || len(t) > 40 || strings.Trim(t, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:._-") != "" {
			return FileStat{}, false
		}
	}
	if !isDigits(f[0]) || !isDigits(f[1]) {
		return FileStat{}, false
	}
	links, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return FileStat{}, false
	}
	size, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return FileStat{}, false
	}
	return FileStat{Links: links, Size: size, Sig: s}, true
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// Reports collects a command's report lines from its stderr, at most max
// bytes (the rest is dropped and recorded), and signals when the first
// report is complete or the command ended. Only lines that start with
// FileHeader or FileTrailer are reports: anything else on stderr is the
// sandbox's own noise (a login shell's rc files, a tool's warning) and is
// dropped, whatever its length. It is safe for concurrent use.
type Reports struct {
	mu       sync.Mutex
	buf      bytes.Buffer // the reports kept
	line     []byte       // the line being written, while it may be a report
	skip     bool         // the line being written is noise
	max      int
	overflow bool
	first    chan struct{}
	signaled bool
}

// NewReports returns a Reports that keeps at most max bytes.
func NewReports(max int) *Reports { return &Reports{max: max, first: make(chan struct{})} }

// Write implements io.Writer; it never fails.
func (c *Reports) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !c.skip {
			c.line = append(c.line, chunk...)
			if !mayBeReport(c.line) {
				c.skip, c.line = true, c.line[:0]
			} else if len(c.line) > c.max {
				c.keep(c.line) // over the limit: overflow
				c.line = c.line[:0]
				c.skip = true
			}
		}
		if i < 0 {
			break
		}
		if !c.skip {
			c.keep(append(c.line, '\n'))
		}
		c.line, c.skip = c.line[:0], false
		p = p[i+1:]
	}
	if !c.signaled && (c.overflow || bytes.IndexByte(c.buf.Bytes(), '\n') >= 0) {
		c.signaled = true
		close(c.first)
	}
	return n, nil
}

// keep adds b to the reports kept, within max.
func (c *Reports) keep(b []byte) {
	if room := c.max - c.buf.Len(); len(b) > room {
		c.overflow = true
		b = b[:max(room, 0)]
	}
	c.buf.Write(b)
}

// mayBeReport says whether line (a line's start) may still be a report.
func mayBeReport(line []byte) bool {
	for _, h := range []string{FileHeader + " ", FileTrailer + " "} {
		k := min(len(line), len(h))
		if string(line[:k]) == h[:k] {
			return true
		}
	}
	return false
}

// First is closed once the first line is complete, the limit is reached
// or End was called.
func (c *Reports) First() <-chan struct{} { return c.first }

// End signals that the command ended (there will be no first line if
// there is none yet).
func (c *Reports) End() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.signaled {
		c.signaled = true
		close(c.first)
	}
}

// Lines returns the complete reports and whether anything else (a partial
// report, bytes over the limit) was written.
func (c *Reports) Lines() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if len(c.line) > 0 && !c.skip {
		s += string(c.line) // a partial report: extra
	}
	var out []string
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return out, c.overflow || s != ""
}
