package shell

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/tree"
)

// The error classes of talking to a sandbox; package sandbox exports them
// (sandbox.ErrTransport, sandbox.ErrProtocol, sandbox.ErrLimit).
var (
	// ErrTransport is wrapped by every transport failure: a command that
	// could not be run or followed to its end, a control operation that
	// outlived its deadline.
	ErrTransport = errors.New("sandbox transport failure")
	// ErrProtocol is wrapped by every reply of a sandbox that answered but
	// broke the protocol: a malformed, oversized or out-of-order reply.
	ErrProtocol = errors.New("sandbox broke the protocol")
	// ErrLimit is wrapped when what a sandbox sent exceeds a bound.
	ErrLimit = tree.ErrLimit
	// ErrBadCommand is matched by a command a Runner refused before it ran
	// anything (sandbox.ErrBadCommand).
	ErrBadCommand = errors.New("the command cannot be run as given")
)

// Entry is one member of a tree stream: a directory (Mode.IsDir), a regular
// file (Mode.IsRegular, Size bytes) or, when read back from a sandbox, a
// link or special file reported by type only.
type Entry struct {
	Path string      // slash-separated, relative to the tree's top; never "" or "."
	Mode fs.FileMode // type and permission bits
	Size int64       // regular files only
}

// The host's tar stream, extracted into a fresh temporary directory:
// "new/tree/" and everything below it, "new/manifest.json", an empty "old/"
// (where the publish moves the previous copy), "modes" (ModesScript of the
// tree's directories, names relative to the temporary directory) and last
// an empty "complete". tar reads its input in order, so "complete" exists
// only when every member before it arrived whole.
const (
	TarNew      = "new/"
	TarTree     = "new/tree/"
	TarManifest = "new/manifest.json"
	TarOld      = "old/"
	TarModes    = "modes"
	TarComplete = "complete"
	// TarPlan is the only member of the archive a send command that takes
	// its carry plan on stdin (Send.PlanIn) reads before the stream: the
	// plan's lines (WritePlan), extracted into the temporary directory.
	TarPlan = "plan"
)

// WalkFunc streams a tree: it calls fn for every directory and regular file,
// a directory before its contents, and returns the tree's canonical
// manifest. A file's reader yields exactly e.Size bytes.
type WalkFunc func(fn func(e Entry, r io.Reader) error) ([]byte, error)

// WriteStream writes the tree walk yields to w as one tar stream in the
// layout above and returns the manifest walk returned. Every member gets
// mtime.
func WriteStream(w io.Writer, mtime time.Time, walk WalkFunc) (manifest []byte, err error) {
	err = writeArchive(w, func(tw *tarWriter) error {
		for _, d := range []string{TarNew, TarTree} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: treeMode, ModTime: mtime}); err != nil {
				return err
			}
		}
		var dirs []Entry
		if manifest, dirs, err = writeTree(tw, TarTree, mtime, walk); err != nil {
			return err
		}
		if err := writeMember(tw, TarManifest, 0o644, mtime, manifest); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: TarOld, Mode: 0o700, ModTime: mtime}); err != nil {
			return err
		}
		if err := writeMember(tw, TarModes, 0o600, mtime, treeModes(dirs)); err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: TarComplete, Mode: 0o600, ModTime: mtime})
	})
	if err != nil {
		return nil, err
	}
	return manifest, nil
}

// treeModes is the modes script (TarModes) of a stream whose tree's
// directories are dirs: ModesScript's lines, then one that gives the
// tree's own top directory the mode of its header (0755). A carry that
// made that directory anew made it under the send command's umask 0
// (0777), and busybox's tar, as a non-root user, keeps the mode of a
// directory that exists, whatever the header says.
func treeModes(dirs []Entry) []byte {
	return fmt.Appendf(ModesScript(TarTree, dirs), "chmod %o -- %s || exit 1\n", treeMode, Quote(strings.TrimSuffix(TarTree, "/")))
}

// treeMode is the mode of the stream's directories TarNew and TarTree.
const treeMode = 0o755

// WritePlan writes p's lines to w as an archive of one member, TarPlan,
// padded to whole TarRecord records: what a send command that takes its
// plan on stdin (Send.PlanIn) reads before the stream, with a tar that
// stops at its archive's end (Caps.Records). The member's time is the
// epoch's: a sandbox clock behind the host's never has tar warn of a
// time in the future.
func WritePlan(w io.Writer, p *CarryPlan) error {
	var buf bytes.Buffer
	buf.Grow(p.Size + 4*TarRecord)
	if err := writeArchive(&buf, func(tw *tarWriter) error {
		return writeMember(tw, TarPlan, 0o600, time.Unix(0, 0), []byte(p.text()))
	}); err != nil {
		return err
	}
	buf.Write(make([]byte, RecordPad(int64(buf.Len()))))
	_, err := w.Write(buf.Bytes())
	return err
}

// WritePlain writes the tree walk yields to w as one plain tar stream (no
// layout: names relative to where the sandbox extracts it), then, as its
// last member, the regular file modes: ModesScript of the tree's
// directories, for the sandbox to run after the extraction (see
// PlainPrepareScript). It returns what walk returned. modes must be a
// name the tree does not hold.
func WritePlain(w io.Writer, mtime time.Time, modes string, walk WalkFunc) (out []byte, err error) {
	err = writeArchive(w, func(tw *tarWriter) error {
		var dirs []Entry
		if out, dirs, err = writeTree(tw, "", mtime, walk); err != nil {
			return err
		}
		return writeMember(tw, modes, 0o600, mtime, ModesScript("", dirs))
	})
	return out, err
}

// writeMember writes the regular file name holding data.
func writeMember(tw *tarWriter, name string, mode int64, mtime time.Time, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// writeArchive gives fn a tar writer on a buffered w, then closes the
// archive and flushes.
func writeArchive(w io.Writer, fn func(tw *tarWriter) error) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := newTarWriter(bw)
	if err := fn(tw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// writeTree writes the directories and regular files walk yields to tw,
// each name prefixed with prefix ("" or a path ending in "/"), and returns
// what walk returned and the directories, in walk order. Every directory
// is written with owner rwx (so that tar, as a non-root user, can fill
// it): its real mode is ModesScript's to set, after the extraction, since
// a sandbox's tar may leave the mode of a directory that already exists
// alone (busybox tar as a non-root user does), whatever a later header
// says. It does not close tw.
func writeTree(tw *tarWriter, prefix string, mtime time.Time, walk WalkFunc) ([]byte, []Entry, error) {
	var dirs []Entry
	buf := make([]byte, 256<<10)
	out, err := walk(func(e Entry, r io.Reader) error {
		h := &tar.Header{Name: prefix + e.Path, Mode: int64(e.Mode.Perm()), ModTime: mtime}
		if e.Mode.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", h.Mode|0o700
			dirs = append(dirs, Entry{Path: e.Path, Mode: e.Mode})
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, e.Size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.CopyBuffer(onlyWriter{tw}, onlyReader{r}, buf)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, dirs, nil
}

// maxModesArgs bounds the bytes of names one chmod line of ModesScript
// holds (ARG_MAX is 128 KiB per argument and about 2 MiB in all on Linux).
const maxModesArgs = 64 << 10

// ModesScript returns the sh lines that give each directory of dirs (a
// tree's directories in walk order: a directory before its contents) its
// permission bits, each name prefixed with prefix and relative to the
// working directory: chmod calls, deepest first (the reverse of walk
// order, so that no directory loses its owner's search permission before
// what is below it is done), consecutive directories of one mode in one
// call. A failed chmod exits 1 (the script is meant to run in a subshell,
// or through sh). Its length is linear in the names'.
func ModesScript(prefix string, dirs []Entry) []byte {
	var sb strings.Builder
	mode, n := fs.FileMode(0), 0
	end := func() {
		if n > 0 {
			sb.WriteString(" || exit 1\n")
		}
		n = 0
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		a := Quote(prefix + d.Path)
		if n > 0 && (d.Mode.Perm() != mode || n+1+len(a) > maxModesArgs) {
			end()
		}
		if n == 0 {
			mode = d.Mode.Perm()
			fmt.Fprintf(&sb, "chmod %o --", mode)
		}
		sb.WriteString(" " + a)
		n += 1 + len(a)
	}
	end()
	return []byte(sb.String())
}

// ErrMalformedTar is wrapped by Members when the stream is not a tar
// archive (or is cut in the middle of one while the command ran
// normally). It is a protocol error: errors.Is matches it to ErrProtocol.
var ErrMalformedTar = ProtocolSentinel("malformed tar stream")

// tarBuffer is the read buffer of Members.
const tarBuffer = 256 << 10

// Member is one member of a tar stream that a sandbox sent, as it stands:
// nothing in it is trusted.
type Member struct {
	Name     string      // the raw member name
	Path     string      // Name as a clean relative path below the top ("./" and a directory's "/" dropped); "" when Name is not one
	Mode     fs.FileMode // type bits, permission bits, and setuid/setgid/sticky so that a caller can refuse them
	Size     int64       // regular files
	Linkname string      // symbolic and hard links: the raw target
}

// Members reads a tar stream from a sandbox and calls fn for each member
// but the top directory itself ("." or "./"). It never fails on a name:
// a member whose name is absolute, unclean or leaves the top has Path "",
// for the caller to refuse. Links and special files are reported by type
// (a hard link, a sparse file or any other type as fs.ModeIrregular) and
// never resolved. For a regular file, r yields its content and is valid
// until fn returns; fn may read all, part or none of it. A stream that is
// not tar fails with ErrMalformedTar (a protocol error); a stream whose
// reader failed with a transport failure (an error wrapping ErrTransport,
// as a pipe closed with the Runner's error does) or with the context's
// error fails with that error, never ErrMalformedTar. A stream that ends
// where a member may end reads as whole, even one cut there: a caller
// that must know it arrived whole needs a mark after it (ReadRestoreEnd),
// read from r itself, which Members reads through without a buffer of
// its own when r is a *bufio.Reader of at least 256 KiB.
func Members(r io.Reader, fn func(m Member, r io.Reader) error) error {
	tr := tar.NewReader(bufio.NewReaderSize(r, tarBuffer))
	for {
		h, err := tr.Next()
		if err == io.EOF { // the stream's own end, not a failure that wraps io.EOF
			return nil
		}
		if err != nil {
			if transportCut(err) {
				return fmt.Errorf("reading the sandbox's tar stream: %w", err)
			}
			return fmt.Errorf("%w: %v", ErrMalformedTar, err)
		}
		m := Member{Name: h.Name, Mode: fs.FileMode(h.Mode) & fs.ModePerm, Linkname: h.Linkname}
		if h.Mode&0o4000 != 0 {
			m.Mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			m.Mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			m.Mode |= fs.ModeSticky
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue // the top directory itself
		}
		if tree.ValidPath(name) {
			m.Path = name
		}
		switch h.Typeflag {
		case tar.TypeDir:
			m.Mode |= fs.ModeDir
		case tar.TypeReg, '\x00': // '\x00': the pre-POSIX regular file
			m.Size = h.Size
		case tar.TypeSymlink:
			m.Mode |= fs.ModeSymlink
		case tar.TypeFifo:
			m.Mode |= fs.ModeNamedPipe
		case tar.TypeChar:
			m.Mode |= fs.ModeDevice | fs.ModeCharDevice
		case tar.TypeBlock:
			m.Mode |= fs.ModeDevice
		default: // hard links and anything else
			m.Mode |= fs.ModeIrregular
		}
		if err := fn(m, tr); err != nil {
			return err
		}
	}
}

// ReadTar parses a tar stream written by a sandbox's `tar -c .` and calls
// fn for each member below the top directory, strictly: a member name that
// is absolute, not clean or leaves the top is a protocol error wrapping
// ErrProtocol, as is a stream that is not tar (ErrMalformedTar); a
// transport failure of the reader stays one (see Members). Links and
// special files are reported by type, never resolved; a hard link is
// reported as fs.ModeIrregular; setuid, setgid and sticky bits are
// dropped.
func ReadTar(r io.Reader, fn func(Entry, io.Reader) error) error {
	err := Members(r, func(m Member, r io.Reader) error {
		if m.Path == "" {
			return fmt.Errorf("%w: the sandbox's tar stream names %q, which is not a clean relative path", ErrProtocol, m.Name)
		}
		return fn(Entry{Path: m.Path, Mode: m.Mode &^ (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), Size: m.Size}, r)
	})
	if errors.Is(err, ErrMalformedTar) {
		return fmt.Errorf("%w: reading the sandbox's tar stream: %w", ErrProtocol, err)
	}
	return err
}

// ErrTruncated is returned by ReadLimited when the content of the
// sandbox's regular files exceeds the byte limit.
var ErrTruncated = errors.New("sandbox stream truncated at the byte limit")

// ReadLimited reads a tar stream from a sandbox's `tar -c` like Members,
// with two more refusals and a bound: a member whose Path holds a
// backslash (which a host may read as a separator) or is longer than
// tree.DefaultMaxPathLen gets Path "" too, and at most limit bytes of
// content are handed out: the regular file that crosses it is reported to
// fn with r == nil and the reader stops with ErrTruncated. A stream that
// is not tar fails with an error wrapping ErrMalformedTar (a protocol
// error).
func ReadLimited(r io.Reader, limit int64, fn func(m Member, r io.Reader) error) error {
	return Members(r, func(m Member, r io.Reader) error {
		if strings.Contains(m.Path, "\\") || len(m.Path) > tree.DefaultMaxPathLen {
			m.Path = ""
		}
		if m.Mode.IsRegular() {
			if m.Size > limit {
				if err := fn(m, nil); err != nil {
					return err
				}
				return ErrTruncated
			}
			limit -= m.Size
		}
		return fn(m, r)
	})
}

// onlyReader hides every method but Read, so io.CopyBuffer uses our buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides every method but Write, so io.CopyBuffer uses our buffer.
type onlyWriter struct{ io.Writer }
