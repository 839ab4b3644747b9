package shell

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
)

// The stage protocol (stage.Bridge): the lines its commands print, the
// capability word, the probe reply and the fetch framing. Everything here
// that reads reads a sandbox's output: it is bounded and every violation
// wraps ErrProtocol.
//
// A probe reply is
//
//	airlock-probe <caps>\n       the header (at most MaxHeaderLine bytes)
//	airlock-leftovers\n          only when the root holds leftovers
//	<tar of the manifests>       then at most MaxArchiveTail bytes of padding
//
// A send command prints ProbeHeader only when asked, then ReadyLine (its
// temporary directory exists), hash lines of the files it carried
// (FormatHashLine) and CarriedLine; a publish, cleanup, unstage or sweep
// prints PublishedLine once its renames are done. A send command that
// publishes in its own session (Send.Publish) prints ExtractedLine once
// the stream is extracted, waits for PublishLine on its stdin and then
// prints PublishedLine too.
const (
	// ReportPrefix starts every line of the protocol's.
	ReportPrefix  = "airlock-"
	ProbeHeader   = "airlock-probe "
	LeftoversLine = "airlock-leftovers"
	ReadyLine     = "airlock-ready"
	CarriedLine   = "airlock-carried"
	ExtractedLine = "airlock-extracted"
	PublishLine   = "airlock-publish"
	PublishedLine = "airlock-published"
)

// The bounds of what a stage command prints.
const (
	// MaxHeaderLine bounds the probe header line, newline included.
	MaxHeaderLine = 4 << 10
	// MaxReportLine bounds one line of a send command's report (a hash
	// line holds a path, at most a few KiB).
	MaxReportLine = 8 << 10
	// MaxArchiveTail bounds what may follow the end of a tar archive: tar
	// pads its output; a little is accepted, never an endless tail.
	MaxArchiveTail = 1 << 20
	// TarReadAhead is how far past the end of an archive ReadTar may have
	// read (its buffer): bytes CheckTail does not see.
	TarReadAhead = tarBuffer
)

// RequiredTools are the tools the stage protocol needs besides POSIX sh.
var RequiredTools = []string{"tar", "mkdir", "mv", "rm", "cat", "chmod"}

// DetectScript sets $c to the capability word (Caps.Word) and $s to 1 when
// the sandbox can hash. The records bit is learnt by trying: an archive
// of one all-zero record followed by a line, extracted with -m (the
// stream's times are not restored: on ext4 that is a sixth of tar's time
// for a tree of small files), and the line must still be there once tar
// has read the archive.
const DetectScript = `m=
for t in tar mkdir mv rm cat chmod; do command -v "$t" >/dev/null 2>&1 || m="$m $t"; done
s=0; { command -v sha256sum || command -v openssl; } >/dev/null 2>&1 && s=1
x=0; mv --help 2>/dev/null | grep -q -e '--exchange' && x=1
__tr=0; [ "$({ dd if=/dev/zero bs=` + tarRecordString + ` count=1 2>/dev/null; echo k; } | { tar -x -m -o -f - >/dev/null 2>&1 && IFS= read -r l && echo "$l"; } 2>/dev/null)" = k ] && __tr=1
c="$s$x$__tr$m"
`

// EchoHeader prints the probe header with the word in $c.
const EchoHeader = `echo "` + ProbeHeader + `$c"` + "\n"

// Caps is what a sandbox offers, as its capability word reports it.
type Caps struct {
	SHA256   bool // sha256sum or openssl: unchanged files can be carried and checked
	Exchange bool // mv --exchange (GNU coreutils 9.5+)
	// Records: the sandbox's tar reads an archive padded to whole
	// TarRecord records no further than the record that ends it (GNU tar
	// does; BusyBox tar reads its input to the end), so a command can
	// read more of its stdin after the stream (Send.Publish), and takes
	// -m (the send command extracts without restoring times).
	Records bool
	Missing string // " tar mv": the RequiredTools the sandbox lacks, each after a space
}

// TarRecord is the record size a stream is padded to for a sandbox whose
// tar stops at the end of its archive's last record (Caps.Records): GNU
// tar's default, 20 blocks of 512 bytes.
const TarRecord = 10240

const tarRecordString = "10240"

// RecordPad returns the zero bytes that pad n bytes of tar stream to
// whole TarRecord records.
func RecordPad(n int64) int64 { return (TarRecord - n%TarRecord) % TarRecord }

// Word returns the capability word DetectScript prints for c.
func (c Caps) Word() string {
	return bit(c.SHA256) + bit(c.Exchange) + bit(c.Records) + c.Missing
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ParseCaps parses a capability word: three digits (0 or 1: sha256,
// exchange, records), then for each missing required tool a space and its
// name. Anything else is an error wrapping ErrProtocol.
func ParseCaps(word string) (Caps, error) {
	if len(word)-len(strings.TrimLeft(word, "01")) != 3 {
		return Caps{}, fmt.Errorf("%w: malformed capability word %q", ErrProtocol, Truncate(word, 64))
	}
	c := Caps{SHA256: word[0] == '1', Exchange: word[1] == '1', Records: word[2] == '1', Missing: word[3:]}
	if c.Missing != "" {
		rest, ok := strings.CutPrefix(c.Missing, " ")
		names := strings.Split(rest, " ")
		for i, n := range names {
			if !ok || !isRequired(n) || indexOf(names[:i], n) >= 0 {
				return Caps{}, fmt.Errorf("%w: malformed capability word %q", ErrProtocol, Truncate(word, 64))
			}
		}
	}
	return c, nil
}

func isRequired(n string) bool { return indexOf(RequiredTools, n) >= 0 }

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// ProbeReply is what a probe reply said.
type ProbeReply struct {
	Asked     bool     // the header held a capability word (not "-")
	Caps      Caps     // when Asked
	Leftovers bool     // the root holds leftovers a sweep would remove
	Files     [][]byte // the regular files asked for, by index; nil when absent or over the bound
	seen      []bool   // which files arrived
	want      map[string]int
}

// ReadProbe reads a probe reply for the files names (paths relative to
// the root), at most maxFile bytes each (a larger one is reported absent)
// and maxAll bytes in all. The header's fields are filled in as soon as it
// is read, so a reply whose archive fails still reports what the sandbox
// offers. A reply that is empty, lacks the header, has a malformed word,
// sends a name not asked for or twice, is not tar, leaves its directory or
// holds more than maxAll bytes fails with an error wrapping ErrProtocol.
func ReadProbe(r io.Reader, names []string, maxFile, maxAll int64) (ProbeReply, error) {
	rep := ProbeReply{Files: make([][]byte, len(names)), seen: make([]bool, len(names)), want: make(map[string]int, len(names))}
	for i, n := range names {
		rep.want[n] = i
	}
	lr := &io.LimitedReader{R: r, N: maxAll + 1}
	br := bufio.NewReaderSize(lr, MaxHeaderLine)
	if err := rep.header(br); err != nil {
		return rep, err
	}
	err := ReadTar(br, func(e Entry, r io.Reader) error { return rep.file(e, r, maxFile) })
	if err == nil {
		err = CheckTail(br)
	}
	if lr.N <= 0 { // whatever else went wrong, the reply was too long
		err = fmt.Errorf("%w: the sandbox sent more than %d bytes", ErrProtocol, maxAll)
	}
	return rep, err
}

// header reads the probe header and the leftovers line.
func (p *ProbeReply) header(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return fmt.Errorf("%w: the sandbox's reply is empty (is /bin/sh there?)", ErrProtocol)
		}
		return fmt.Errorf("%w: the reply does not start with a header line: %v", ErrProtocol, err)
	}
	word, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), ProbeHeader)
	if !ok {
		return fmt.Errorf("%w: the reply starts with %q, not the probe header", ErrProtocol, Truncate(string(line), 64))
	}
	if word != "-" {
		c, err := ParseCaps(word)
		if err != nil {
			return err
		}
		p.Asked, p.Caps = true, c
	}
	if next, _ := br.Peek(len(LeftoversLine) + 1); string(next) == LeftoversLine+"\n" {
		_, _ = br.Discard(len(next))
		p.Leftovers = true
	}
	return nil
}

// file keeps one member of the probe's archive.
func (p *ProbeReply) file(e Entry, r io.Reader, maxFile int64) error {
	i, ok := p.want[e.Path]
	switch {
	case !ok:
		return fmt.Errorf("%w: the sandbox sent %q, which was not asked for", ErrProtocol, e.Path)
	case p.seen[i]:
		return fmt.Errorf("%w: the sandbox sent %q twice", ErrProtocol, e.Path)
	}
	p.seen[i] = true
	if !e.Mode.IsRegular() || e.Size > maxFile {
		return nil // not a usable file
	}
	// The header's size, bounded above, sizes the buffer: one read, no
	// growing copies of a manifest of megabytes.
	data := make([]byte, e.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	p.Files[i] = data
	return nil
}

// CheckTail reads what follows the end of an archive read by ReadTar:
// under MaxArchiveTail bytes are accepted (tar pads its output), besides
// the at most TarReadAhead bytes that ReadTar buffered past the end; more
// is an error wrapping ErrProtocol.
func CheckTail(r io.Reader) error {
	if n, _ := io.Copy(io.Discard, io.LimitReader(r, MaxArchiveTail)); n == MaxArchiveTail {
		return fmt.Errorf("%w: data after the end of the archive", ErrProtocol)
	}
	return nil
}

// FormatHashLine returns the line sha256sum (two spaces) or openssl dgst -r
// (a space and '*') prints for the file p whose SHA-256 is sum (64
// lowercase hex digits).
func FormatHashLine(sum, p string, binary bool) string {
	if binary {
		return sum + " *" + p + "\n"
	}
	return sum + "  " + p + "\n"
}

// ParseHashLine parses a hash line without its newline.
func ParseHashLine(l string) (sum, p string, ok bool) {
	if len(l) >= 67 && l[64] == ' ' && (l[65] == ' ' || l[65] == '*') {
		return l[:64], l[66:], true
	}
	return "", "", false
}

// Report parses what a send (or carry) command prints on stdout: the
// optional probe header, ReadyLine, hash lines and CarriedLine.
type Report struct {
	want    map[string]string
	Caps    string        // the word after ProbeHeader; "" when none came
	Ready   chan struct{} // closed at ReadyLine
	Carried chan struct{} // closed at CarriedLine
	// Extracted and Published are closed at ExtractedLine and at
	// PublishedLine after it (a send command that publishes, Send.Publish).
	Extracted, Published chan struct{}
	Done                 chan struct{} // closed when stdout ends
	Hashes               map[string]bool
	Err                  error // a malformed report (ErrProtocol); set before Done is closed
	// publish is publishUnsent until PublishSent (publishSent), or until a
	// PublishedLine came before it (publishForged): the one that comes
	// first decides, so a forged line read while the host decides to
	// write the publish line never lets the line go.
	publish atomic.Int32
}

const (
	publishUnsent int32 = iota
	publishSent
	publishForged
)

// PublishSent tells the report that the host is about to write the
// publish line (PublishLine), and reports whether it may: false when a
// PublishedLine was read already, a forgery, since the script prints it
// only after that line (the report then breaks the protocol, ErrProtocol,
// and the line must not be written).
func (s *Report) PublishSent() bool {
	return s.publish.CompareAndSwap(publishUnsent, publishSent) || s.publish.Load() == publishSent
}

// NewReport returns a Report that accepts the hashes in want (path →
// lowercase hex SHA-256).
func NewReport(want map[string]string) *Report {
	return &Report{want: want, Ready: make(chan struct{}), Carried: make(chan struct{}), Extracted: make(chan struct{}), Published: make(chan struct{}), Done: make(chan struct{}), Hashes: make(map[string]bool)}
}

// Read parses r until it ends; onErr runs once when the report breaks the
// protocol (after which r is drained). Lines before ReadyLine may only be
// the probe header; lines between ReadyLine and CarriedLine are hash
// lines and linked lines (at most one per wanted file, plus a little; no
// other line of the protocol's, whose lines all start with ReportPrefix,
// may come there); PublishedLine may only come once the host said it
// sent the publish line (PublishSent); after CarriedLine
// nothing but ExtractedLine may come, so that a garbled one fails at once
// (the command that publishes waits for the host's line after it). No
// line before ExtractedLine may be longer than MaxReportLine.
// After ExtractedLine, the publish's output is read as a publish command's
// (LineWatch): PublishedLine must come first; anything else is drained
// unread (a sandbox's noisy mv), and the command's exit status decides.
func (s *Report) Read(r io.Reader, onErr func()) {
	defer close(s.Done)
	br := bufio.NewReaderSize(r, 16<<10)
	phase, lines := 0, 0 // phase 0: before ready, 1: carrying, 2: after carried, 3: after extracted, 4: after published
	for {
		line, err := br.ReadSlice('\n')
		if phase == 4 || phase == 3 && string(line) != PublishedLine+"\n" {
			_, _ = io.Copy(io.Discard, br)
			return
		}
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > MaxReportLine {
			s.fail(r, onErr, "a report line of more than %d bytes", MaxReportLine)
			return
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			lines++
			if msg := s.line(string(line[:len(line)-1]), &phase, lines); msg != "" {
				s.fail(r, onErr, "%s", msg)
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.Err = fmt.Errorf("%w: reading the report: %w", ErrTransport, err)
			}
			return
		}
	}
}

// line handles one line of the report; it returns what is wrong with it.
func (s *Report) line(l string, phase *int, lines int) string {
	switch {
	case *phase == 0 && l == ReadyLine:
		*phase = 1
		close(s.Ready)
	case *phase == 0 && strings.HasPrefix(l, ProbeHeader) && s.Caps == "":
		s.Caps = strings.TrimPrefix(l, ProbeHeader)
	case *phase == 0:
		return fmt.Sprintf("unexpected output before the temporary directory was made: %q", Truncate(l, 80))
	case *phase == 1 && l == CarriedLine:
		*phase = 2
		close(s.Carried)
	case *phase == 1:
		if lines > len(s.want)+16 {
			return "more hash lines than files carried"
		}
		if strings.HasPrefix(l, ReportPrefix) && !strings.HasPrefix(l, LinkedLine) {
			return fmt.Sprintf("out-of-order line during the carry: %q", Truncate(l, 80))
		}
		if p, ok := strings.CutPrefix(l, LinkedLine); ok && s.want[p] != "" {
			s.Hashes[p] = true
		} else if sum, p, ok := ParseHashLine(l); ok {
			p = strings.TrimPrefix(p, "./") // a name starting with "-" is hashed as ./NAME (PlanCarry)
			if s.want[p] == sum {
				s.Hashes[p] = true
			}
		}
	case *phase == 2 && l == ExtractedLine:
		*phase = 3
		close(s.Extracted)
	case *phase == 3 && l == PublishedLine && s.publish.CompareAndSwap(publishUnsent, publishForged):
		return "the copy reported published before the host sent the publish line"
	case *phase == 3 && l == PublishedLine:
		*phase = 4
		close(s.Published)
	default: // after CarriedLine the script's stdout carries nothing else (tar's goes to stderr)
		return fmt.Sprintf("output after the carry: %q", Truncate(l, 80))
	}
	return ""
}

func (s *Report) fail(r io.Reader, onErr func(), format string, a ...any) {
	if s.Err == nil {
		s.Err = fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
		onErr()
	}
	_, _ = io.Copy(io.Discard, r) // let the command finish writing
}

// LineWatch is a command's stdout that closes Seen once the output starts
// with Line and a newline; it keeps no more than that.
type LineWatch struct {
	line string
	mu   sync.Mutex
	buf  []byte
	seen chan struct{}
	ok   bool
}

// NewLineWatch returns a LineWatch for line (without its newline).
func NewLineWatch(line string) *LineWatch {
	return &LineWatch{line: line + "\n", seen: make(chan struct{})}
}

// Write implements io.Writer; it never fails.
func (w *LineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ok && len(w.buf) < len(w.line) {
		w.buf = append(w.buf, p[:min(len(p), len(w.line)-len(w.buf))]...)
		if string(w.buf) == w.line {
			w.ok = true
			close(w.seen)
		}
	}
	return len(p), nil
}

// Seen is closed once the line came.
func (w *LineWatch) Seen() <-chan struct{} { return w.seen }

// Saw reports whether the line came.
func (w *LineWatch) Saw() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok
}

// The fetch script's report of an unusable directory: exit status
// FetchUnusable and FetchUnusableMarker, then the reason, on stderr.
const (
	FetchUnusable       = 3
	FetchUnusableMarker = "airlock-fetch: "
)

// FetchScript sends the directory d (under root) as a tar archive on
// stdout, or, when d or root is unusable, exits FetchUnusable and says why.
// A sandbox user other than root cannot read a file without its owner's
// read bit nor list a directory without its owner's read and search bits
// (a staged copy the agent chmodded, or a Source's mode 000 file): such an
// entry anywhere in d makes d unusable too, rather than a tar that fails
// half-way.
func FetchScript(root, d string) string {
	return fmt.Sprintf(`d=%s; w=
if [ -L %s ]; then w='lies under a stage root that is a symbolic link'
elif [ -L "$d" ]; then w='is a symbolic link'
elif [ ! -e "$d" ]; then w='is missing'
elif [ ! -d "$d" ]; then w='is not a directory'
elif [ ! -r "$d" ] || [ ! -x "$d" ] || ! cd "$d" 2>/dev/null; then w='is not readable'
elif [ "$(id -u 2>/dev/null)" != 0 ] && [ -n "$(find . \( -type f ! -perm -400 \) -o \( -type d ! -perm -500 \) 2>/dev/null | head -n 1)" ]; then w='holds an entry its owner cannot read (no read bit on a file, or no read or search bit on a directory), which a sandbox user other than root cannot read back'
fi
if [ -n "$w" ]; then echo "%s$w" >&2; exit %d; fi
exec tar -c -f - .`, Quote(d), Quote(root), FetchUnusableMarker, FetchUnusable)
}

// FetchReason returns the reason a fetch script gave on stderr for
// exiting FetchUnusable ("is missing"), or false when stderr holds none.
func FetchReason(stderr string) (string, bool) {
	return strings.CutPrefix(strings.TrimSpace(stderr), FetchUnusableMarker)
}

// ReadFetch reads a fetch's archive (ReadTar), calls atEnd once the
// archive ended, then checks its tail (CheckTail).
func ReadFetch(r io.Reader, fn func(Entry, io.Reader) error, atEnd func()) error {
	if err := ReadTar(r, fn); err != nil {
		return err
	}
	atEnd()
	return CheckTail(r)
}
