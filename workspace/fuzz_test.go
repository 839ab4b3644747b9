package workspace

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/internal/tree"
)

// FuzzRestoreHeader checks the parser of a sandbox's restore stream: what
// it accepts names only clean relative paths, a known tail and well-formed
// object names, and serializing the result again parses to the same.
// Seeds: testdata/fuzz/FuzzRestoreHeader.
func FuzzRestoreHeader(f *testing.F) {
	f.Add([]byte("airlock-restore 1\nreport 0\nnochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 8\nh./a/b\x00s./c\x00nochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 0\nbundle - "+strings.Repeat("a", 40)+"\nPACK"), true)
	f.Add([]byte("airlock-restore 1\nreport 7\nh../x\x00\x00tar\n"), false)
	f.Add([]byte("airlock-restore 1\nreport 0\ntar\n"), false)
	f.Add([]byte("airlock-restore 1\nreport 22\nr./.airlock/x\x00u./suid\x00nochange\n"), true)
	f.Add([]byte("airlock-restore 1\nreport 22\ns./f\x00G\x00.GIT./x\x00f\x00sub/\x00nochange\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, git bool) {
		br := bufio.NewReader(bytes.NewReader(data))
		h, err := readHeader(br, git)
		if err != nil {
			return
		}
		var rep bytes.Buffer
		keys := make([]string, 0, len(h.special))
		for p := range h.special {
			if !tree.ValidPath(p) {
				t.Fatalf("accepted path %q", p)
			}
			keys = append(keys, p)
		}
		slices.Sort(keys)
		var notAdded []string
		for _, p := range keys {
			c := h.special[p]
			if !strings.ContainsRune("husrg", rune(c)) {
				t.Fatalf("accepted record type %q", c)
			}
			if c == 'g' {
				notAdded = append(notAdded, p)
				continue
			}
			fmt.Fprintf(&rep, "%c./%s\x00", c, p)
		}
		if len(notAdded) > 0 {
			rep.WriteString("G\x00" + strings.Join(notAdded, "\x00") + "\x00")
		}
		tail := h.tail
		switch h.tail {
		case "bundle":
			head := h.head
			if head == "" {
				head = "-"
			} else if !isHex(head) {
				t.Fatalf("accepted head %q", head)
			}
			if !isHex(h.snap) {
				t.Fatalf("accepted snap %q", h.snap)
			}
			tail = "bundle " + head + " " + h.snap
		case "nochange":
			if !git {
				t.Fatal("nochange accepted for a plain stream")
			}
		case "tar", "empty":
			if git {
				t.Fatal("a plain tail accepted for a git stream")
			}
		default:
			t.Fatalf("accepted tail %q", h.tail)
		}
		again := fmt.Sprintf("airlock-restore 1\nreport %d\n%s%s\n", rep.Len(), rep.String(), tail)
		h2, err := readHeader(bufio.NewReader(strings.NewReader(again)), git)
		if err != nil {
			t.Fatalf("re-serialized header %q does not parse: %v", again, err)
		}
		if h2.tail != h.tail || h2.head != h.head || h2.snap != h.snap || !maps.Equal(h2.special, h.special) {
			t.Fatalf("round trip changed the header: %+v vs %+v", h2, h)
		}
	})
}

// FuzzReadTar checks the hostile tar reader: an entry's Path is either
// empty or a clean relative path, and no more than the limit of content is
// ever handed out.
func FuzzReadTar(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 3, Mode: 0o4755})
	tw.Write([]byte("abc"))
	tw.WriteHeader(&tar.Header{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"})
	tw.Close()
	f.Add(buf.Bytes(), int64(2))
	f.Add(buf.Bytes(), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		if limit < 0 {
			limit = -limit
		}
		var got int64
		err := readTar(bytes.NewReader(data), limit, func(e tarEntry, r io.Reader) error {
			if e.Path != "" && (!tree.ValidPath(e.Path) || strings.HasPrefix(e.Path, "/")) {
				t.Fatalf("unclean path %q accepted", e.Path)
			}
			if r == nil {
				return nil
			}
			n, _ := io.Copy(io.Discard, r)
			if e.Mode.IsRegular() {
				got += n
			}
			return nil
		})
		_ = err
		if got > limit {
			t.Fatalf("handed out %d bytes past the limit %d", got, limit)
		}
	})
}

// FuzzProbe checks the probe parser: it accepts only known tools and
// object names, and never more than maxProbeHave of them.
func FuzzProbe(f *testing.F) {
	f.Add([]byte("tool git\ntool tar\ngitversion git version 2.39.5\nhave " + strings.Repeat("b", 40) + "\nend\n"))
	f.Add([]byte("tool sh\nend\n"))
	f.Add([]byte("end"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProbe(data)
		if err != nil {
			return
		}
		for tool := range p.tools {
			if tool != "git" && tool != "tar" {
				t.Fatalf("tool %q accepted", tool)
			}
		}
		if len(p.have) > maxProbeHave {
			t.Fatal("too many commits accepted")
		}
		for _, h := range p.have {
			if !isHex(h) {
				t.Fatalf("object name %q accepted", h)
			}
		}
	})
}

// FuzzDecodeRecord: whatever decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	r := record{Schema: recordSchema, ID: strings.Repeat("a", 24), Kind: kindPlain, Local: "/l", Remote: "/r", Exclude: []string{}}
	f.Add(r.encode())
	f.Add(append(r.encode(), ' '))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data)
		if err != nil {
			return
		}
		if !bytes.Equal(rec.encode(), data) {
			t.Fatalf("accepted non-canonical %q", data)
		}
	})
}

// FuzzParseTree checks the git tree object parser: what it accepts
// encodes back to exactly its input (octal modes, names up to their NUL,
// ids of the hash's length in lowercase hex), and it never reads past the
// data.
func FuzzParseTree(f *testing.F) {
	f.Add([]byte("100644 a\x00"+strings.Repeat("\x01", 20)+"40000 ..\x00"+strings.Repeat("\xff", 20)), 20)
	f.Add([]byte("100644 a\x00"+strings.Repeat("\x01", 32)), 32)
	f.Add([]byte("100644 \x00"+strings.Repeat("\x01", 19)), 20)
	f.Add([]byte("1x0644 a\x00"+strings.Repeat("\x01", 20)), 20)
	f.Fuzz(func(t *testing.T, data []byte, idLen int) {
		if idLen != 20 && idLen != 32 {
			return
		}
		ents, err := parseTree(data, idLen)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, e := range ents {
			if e.mode == "" || strings.Trim(e.mode, "01234567") != "" || strings.ContainsRune(e.name, 0) || len(e.id) != 2*idLen || strings.ToLower(e.id) != e.id {
				t.Fatalf("bad entry accepted: %+v", e)
			}
			raw, err := hex.DecodeString(e.id)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(e.mode + " " + e.name + "\x00")
			b.Write(raw)
		}
		if !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("entries %+v encode to %q, not the input %q", ents, b.Bytes(), data)
		}
	})
}
