package shell

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/airlockdev/airlock/internal/tree"
)

// FuzzRestoreHeader checks the parser of a sandbox's restore stream: what
// it accepts names only clean relative paths, a known tail and well-formed
// object names, and serializing the result again parses to the same; what
// it refuses is a protocol error, never a transport failure (the input
// is all there). Seeds: testdata/fuzz/FuzzRestoreHeader.
func FuzzRestoreHeader(f *testing.F) {
	oid := strings.Repeat("a", 40)
	staged := string(StagedRecords(Staged{Entries: []StagedEntry{{Path: "a", Mode: "100644", ID: oid}, {Path: "gone"}, {Path: "n", Mode: "100644", ID: oid, IntentToAdd: true}}}))
	f.Add([]byte("airlock-restore 1\nreport 0\nstaged 0\nnochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 8\nh./a/b\x00s./c\x00staged 0\nnochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 0\nstaged 0\nbundle - "+oid+"\nPACK"), true)
	f.Add([]byte(fmt.Sprintf("airlock-restore 1\nreport 0\nstaged %d\n%sbundle %s %s %s\nPACK", len(staged), staged, oid, oid, oid)), true)
	f.Add([]byte("airlock-restore 1\nreport 0\nstaged 2\nU\x00bundle - "+oid+"\nPACK"), true)
	f.Add([]byte("airlock-restore 1\nreport 7\nh../x\x00\x00tar\n"), false)
	f.Add([]byte("airlock-restore 1\nreport 0\ntar\n"), false)
	f.Add([]byte("airlock-restore 1\nreport 22\nr./.airlock/x\x00u./suid\x00staged 0\nnochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 22\ns./f\x00G\x00.GIT./x\x00f\x00sub/\x00staged 0\nnochange\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, git bool) {
		h, err := ReadRestoreHeader(bufio.NewReader(bytes.NewReader(data)), git)
		if err != nil {
			if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrTransport) {
				t.Fatalf("a refused header is not (only) a protocol error: %v", err)
			}
			return
		}
		again := reserialize(t, h, git)
		h2, err := ReadRestoreHeader(bufio.NewReader(strings.NewReader(again)), git)
		if err != nil {
			t.Fatalf("re-serialized header %q does not parse: %v", again, err)
		}
		if h2.Tail != h.Tail || h2.Head != h.Head || h2.Snap != h.Snap || h2.Index != h.Index || !maps.Equal(h2.Special, h.Special) || !reflect.DeepEqual(h2.Staged, h.Staged) {
			t.Fatalf("round trip changed the header: %+v vs %+v", h2, h)
		}
	})
}

// reserialize writes h as a restore stream's header again, checking on the
// way that it holds only what the format allows.
func reserialize(t *testing.T, h RestoreHeader, git bool) string {
	var rep bytes.Buffer
	keys := slices.Sorted(maps.Keys(h.Special))
	var notAdded []string
	for _, p := range keys {
		if !tree.ValidPath(p) {
			t.Fatalf("accepted path %q", p)
		}
		c := h.Special[p]
		if !strings.ContainsRune("husrgn", rune(c)) {
			t.Fatalf("accepted record type %q", c)
		}
		if c == ReportNotAdded {
			notAdded = append(notAdded, p)
			continue
		}
		fmt.Fprintf(&rep, "%c./%s\x00", c, p)
	}
	if len(notAdded) > 0 {
		rep.WriteString("G\x00" + strings.Join(notAdded, "\x00") + "\x00")
	}
	tail := h.Tail
	switch h.Tail {
	case TailBundle:
		head := h.Head
		if head == "" {
			head = "-"
		} else if !IsObjectName(head) {
			t.Fatalf("accepted head %q", head)
		}
		if !IsObjectName(h.Snap) {
			t.Fatalf("accepted snap %q", h.Snap)
		}
		tail = "bundle " + head + " " + h.Snap
		if h.Index != "" {
			if !IsObjectName(h.Index) || len(h.Staged.Entries) == 0 {
				t.Fatalf("accepted index commit %q beside %d staged entries", h.Index, len(h.Staged.Entries))
			}
			tail += " " + h.Index
		} else if len(h.Staged.Entries) > 0 {
			t.Fatal("staged entries accepted without an index commit")
		}
	case TailNoChange:
		if !git {
			t.Fatal("nochange accepted for a plain stream")
		}
		if !h.Staged.Empty() {
			t.Fatal("nochange accepted after a staged section")
		}
	case TailTar, TailEmpty:
		if git {
			t.Fatal("a plain tail accepted for a git stream")
		}
	default:
		t.Fatalf("accepted tail %q", h.Tail)
	}
	staged := ""
	if git {
		checkStaged(t, h.Staged)
		st := StagedRecords(h.Staged)
		staged = fmt.Sprintf("staged %d\n%s", len(st), st)
	} else if !reflect.DeepEqual(h.Staged, Staged{}) {
		t.Fatal("a plain stream accepted with a staged section")
	}
	return fmt.Sprintf("airlock-restore 1\nreport %d\n%s%s%s\n", rep.Len(), rep.String(), staged, tail)
}

// FuzzReadLimited checks the hostile tar reader with a byte limit: an
// entry's Path is either empty or a clean relative path without a
// backslash, no more than the limit of content is ever handed out, and a
// stream that is not tar is a protocol error.
func FuzzReadLimited(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(f, tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 3, Mode: 0o4755}))
	_, err := tw.Write([]byte("abc"))
	must(f, err)
	must(f, tw.WriteHeader(&tar.Header{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o755}))
	must(f, tw.WriteHeader(&tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}))
	must(f, tw.WriteHeader(&tar.Header{Name: `d\e`, Typeflag: tar.TypeReg}))
	must(f, tw.Close())
	f.Add(buf.Bytes(), int64(2))
	f.Add(buf.Bytes(), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		if limit < 0 {
			limit = -limit
		}
		var got int64
		err := ReadLimited(bytes.NewReader(data), limit, func(e Member, r io.Reader) error {
			if e.Path != "" && (!tree.ValidPath(e.Path) || strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, `\`)) {
				t.Fatalf("unclean path %q accepted", e.Path)
			}
			if r == nil {
				return nil
			}
			n, err := io.Copy(io.Discard, r)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				return err
			}
			if e.Mode.IsRegular() {
				got += n
			}
			return nil
		})
		if err != nil && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error class: %v", err)
		}
		if errors.Is(err, ErrTransport) {
			t.Fatalf("a stream read from memory failed as a transport failure: %v", err)
		}
		if got > limit {
			t.Fatalf("handed out %d bytes past the limit %d", got, limit)
		}
	})
}

// FuzzWorkspaceProbe checks the probe parser: it accepts only known tools
// and object names, and never more than MaxProbeHave of them; what it
// refuses is a protocol error.
func FuzzWorkspaceProbe(f *testing.F) {
	f.Add([]byte("tool git\ntool tar\ngitversion git version 2.39.5\nhave " + strings.Repeat("b", 40) + "\nend\n"))
	f.Add([]byte("tool sh\nend\n"))
	f.Add([]byte("end"))
	f.Add([]byte("real /a/b\nid 65024 5308426\nid - -\nid 1 2\nend\n"))
	f.Add([]byte("real /a\nmount /a/b\\040c\nmount /a/d\nend\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseWorkspaceProbe(data)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("a refused probe is not a protocol error: %v", err)
			}
			return
		}
		for tool := range p.Tools {
			if tool != "git" && tool != "tar" {
				t.Fatalf("tool %q accepted", tool)
			}
		}
		if len(p.Have) > MaxProbeHave {
			t.Fatal("too many commits accepted")
		}
		for _, h := range p.Have {
			if !IsObjectName(h) {
				t.Fatalf("object name %q accepted", h)
			}
		}
		if p.Real != "" && (!path.IsAbs(p.Real) || path.Clean(p.Real) != p.Real || strings.ContainsRune(p.Real, 0)) {
			t.Fatalf("real path %q accepted", p.Real)
		}
		if len(p.IDs) > MaxProbeIDs {
			t.Fatal("too many ids accepted")
		}
		if len(p.Mounts) > MaxMounts {
			t.Fatal("too many mount points accepted")
		}
		for _, m := range p.Mounts {
			found := false
			for l := range strings.SplitSeq(string(data), "\n") {
				if v, ok := strings.CutPrefix(l, "mount "); ok && v != "" && unescapeMount(v) == m {
					found = true
				}
			}
			if m == "" || strings.ContainsRune(m, 0) || !found {
				t.Fatalf("mount point %q is not a line of the input, decoded", m)
			}
		}
		for _, id := range p.IDs {
			if !id.OK && id != (FileID{}) {
				t.Fatalf("an unknown id with numbers: %+v", id)
			}
			if id.OK && !strings.Contains(string(data), fmt.Sprintf("id %d %d\n", id.Dev, id.Ino)) {
				t.Fatalf("id %+v is not the decimal line of the input", id)
			}
		}
	})
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// FuzzReadRestoreEnd checks the reader of a plain restore stream's end:
// it accepts exactly zero bytes of tar padding (at most maxTarPad), the
// end line and nothing after it; it refuses anything else as a protocol
// error (the input is all there), never a transport failure; and a
// stream it accepts, cut short anywhere, is refused.
func FuzzReadRestoreEnd(f *testing.F) {
	f.Add([]byte(RestoreEnd+"\n"), 0)
	f.Add([]byte(strings.Repeat("\x00", 9216)+RestoreEnd+"\n"), 100)
	f.Add([]byte(RestoreEnd+"\nmore"), 3)
	f.Add([]byte("\x00\x00"+RestoreEnd), 1)
	f.Add([]byte("\x00x"+RestoreEnd+"\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		err := ReadRestoreEnd(bufio.NewReaderSize(bytes.NewReader(data), 256<<10))
		pad := len(data) - len(bytes.TrimLeft(data, "\x00"))
		want := pad <= maxTarPad && string(data[pad:]) == RestoreEnd+"\n"
		if want != (err == nil) {
			t.Fatalf("ReadRestoreEnd(%.80q) = %v, want accepted %v", data, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrTransport) {
				t.Fatalf("a refused end is not (only) a protocol error: %v", err)
			}
			return
		}
		n := max(cut, -cut) % len(data) // a proper prefix
		if err := ReadRestoreEnd(bufio.NewReaderSize(bytes.NewReader(data[:n]), 256<<10)); err == nil {
			t.Fatalf("the prefix %.80q of an accepted end is accepted too", data[:n])
		}
	})
}

// TestReadRestoreEndTransport: a stream whose reader fails with a
// transport failure before the end line fails with that failure.
func TestReadRestoreEndTransport(t *testing.T) {
	cut := fmt.Errorf("%w: connection lost", ErrTransport)
	for _, prefix := range []string{"", "\x00\x00", "\x00" + RestoreEnd, RestoreEnd + "\n"} {
		r := io.MultiReader(strings.NewReader(prefix), iotest.ErrReader(cut))
		err := ReadRestoreEnd(bufio.NewReaderSize(r, 256<<10))
		if !errors.Is(err, ErrTransport) || errors.Is(err, ErrProtocol) {
			t.Errorf("after %q: %v, want the transport's failure", prefix, err)
		}
	}
}
