package stage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

type member struct {
	name     string
	typeflag byte
	body     string
	link     string
}

func tarOf(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Typeflag: m.typeflag, Mode: 0o640, Size: int64(len(m.body)), Linkname: m.link}
		if m.typeflag != tar.TypeReg {
			h.Size = 0
		}
		require.NoError(t, tw.WriteHeader(h))
		if m.typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(m.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// TestReadTarStreamHostile feeds the bridge's Fetch parser archives a
// hostile sandbox could produce.
func TestReadTarStreamHostile(t *testing.T) {
	bad := []string{"/etc/passwd", "../x", "a/../../x", "./a/../b", "a//b", "a/./b"}
	for _, name := range bad {
		t.Run(name, func(t *testing.T) {
			data := tarOf(t, member{name: name, typeflag: tar.TypeReg, body: "x"})
			err := stage.ReadTarStream(bytes.NewReader(data), func(stage.Entry, io.Reader) error {
				t.Fatalf("entry %q must not reach fn", name)
				return nil
			})
			assert.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.ErrorContains(t, err, "which is not a clean relative path")
		})
	}
	t.Run("TypesReported", func(t *testing.T) {
		data := tarOf(t,
			member{name: "./", typeflag: tar.TypeDir},
			member{name: "./d/", typeflag: tar.TypeDir},
			member{name: "./d/f", typeflag: tar.TypeReg, body: "content"},
			member{name: "./l", typeflag: tar.TypeSymlink, link: "/etc/passwd"},
			member{name: "./h", typeflag: tar.TypeLink, link: "d/f"},
			member{name: "./p", typeflag: tar.TypeFifo},
		)
		got := map[string]fs.FileMode{}
		var content string
		err := stage.ReadTarStream(bytes.NewReader(data), func(e stage.Entry, r io.Reader) error {
			got[e.Path] = e.Mode.Type()
			if e.Mode.IsRegular() {
				b, err := io.ReadAll(r)
				content = string(b)
				return err
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, map[string]fs.FileMode{"d": fs.ModeDir, "d/f": 0, "l": fs.ModeSymlink, "h": fs.ModeIrregular, "p": fs.ModeNamedPipe}, got)
		assert.Equal(t, "content", content)
	})
	t.Run("Garbage", func(t *testing.T) {
		err := stage.ReadTarStream(bytes.NewReader(bytes.Repeat([]byte("x"), 1024)), func(stage.Entry, io.Reader) error { return nil })
		assert.ErrorIs(t, err, sandbox.ErrProtocol)
		assert.False(t, errors.Is(err, sandbox.ErrTransport), "a hostile stream is no transport failure: %v", err)
	})
}

// TestBridgeProbeHostile answers the probe with archives a hostile sandbox
// could send.
func TestBridgeProbeHostile(t *testing.T) {
	const m = ".airlock-manifest-a.json"
	cases := []struct {
		name     string
		out      []byte
		protocol bool
		want     [][]byte
	}{
		{"Nothing", nil, false, [][]byte{nil, nil}},
		{"One", tarOf(t, member{name: m, typeflag: tar.TypeReg, body: "{}"}), false, [][]byte{[]byte("{}"), nil}},
		{"LinkIsNoManifest", tarOf(t, member{name: m, typeflag: tar.TypeSymlink, link: "/etc/passwd"}), false, [][]byte{nil, nil}},
		{"NotAskedFor", tarOf(t, member{name: "other", typeflag: tar.TypeReg, body: "x"}), true, nil},
		{"Twice", tarOf(t, member{name: m, typeflag: tar.TypeReg, body: "1"}, member{name: m, typeflag: tar.TypeReg, body: "2"}), true, nil},
		{"Escape", tarOf(t, member{name: "../" + m, typeflag: tar.TypeReg, body: "x"}), true, nil},
		{"Garbage", []byte(strings.Repeat("garbage!", 200)), true, nil},
		{"NoHeader", nil, true, nil},
		{"BadCaps", nil, true, nil},
		{"Flood", nil, true, nil},
	}
	header := []byte("airlock-probe 10\n")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := append(append([]byte(nil), header...), c.out...)
			switch c.name {
			case "NoHeader":
				out = tarOf(t, member{name: m, typeflag: tar.TypeReg, body: "{}"})
			case "BadCaps":
				out = []byte("airlock-probe 2x\n")
			case "Flood": // one manifest per name, each under the per-manifest bound, more than the whole reply may hold
				big := strings.Repeat("x", stage.MaxManifestBytes/2+1)
				out = append(append([]byte(nil), header...), tarOf(t,
					member{name: ".airlock-manifest-a.json", typeflag: tar.TypeReg, body: big},
					member{name: ".airlock-manifest-b.json", typeflag: tar.TypeReg, body: big},
					member{name: ".airlock-manifest-c.json", typeflag: tar.TypeReg, body: big})...)
			}
			r := &scriptedRunner{match: func(sandbox.Command) bool { return true }, do: func(_ context.Context, cmd sandbox.Command) error {
				_, err := cmd.Stdout.Write(out)
				return err
			}}
			names := []string{"a", "b"}
			if c.name == "Flood" {
				names = append(names, "c")
			}
			got, err := stage.NewBridge(r).Probe(context.Background(), "/rt", names)
			if c.protocol {
				assert.ErrorIs(t, err, sandbox.ErrProtocol)
				assert.False(t, errors.Is(err, sandbox.ErrTransport), "a hostile reply is no transport failure: %v", err)
				assert.ErrorContains(t, err, "reading the stored manifests under /rt")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// FuzzReadTarStream checks that whatever archive a sandbox sends, the parser
// hands fn only clean relative paths (or fails).
func FuzzReadTarStream(f *testing.F) {
	for _, seed := range [][]member{
		{{name: "./", typeflag: tar.TypeDir}, {name: "./a", typeflag: tar.TypeReg, body: "x"}},
		{{name: "../x", typeflag: tar.TypeReg, body: "x"}},
		{{name: "l", typeflag: tar.TypeSymlink, link: "/etc"}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, m := range seed {
			require.NoError(f, tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: m.typeflag, Size: int64(len(m.body)), Linkname: m.link}))
			if m.typeflag == tar.TypeReg {
				_, err := tw.Write([]byte(m.body))
				require.NoError(f, err)
			}
		}
		require.NoError(f, tw.Close())
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Errors are expected for most inputs; the property is about fn.
		_ = stage.ReadTarStream(bytes.NewReader(data), func(e stage.Entry, r io.Reader) error {
			p := e.Path
			if p == "" || p == "." || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("unclean path %q reached fn", p)
			}
			if e.Mode.IsRegular() {
				n, err := io.Copy(io.Discard, r)
				if err == nil && n != e.Size {
					t.Fatalf("%q: read %d bytes, entry says %d", p, n, e.Size)
				}
			}
			return nil
		})
	})
}

// TestBridgeProbeMissingTool: a sandbox without a tool the protocol needs
// fails the first probe with an error that names the tool.
func TestBridgeProbeMissingTool(t *testing.T) {
	r := &scriptedRunner{match: func(sandbox.Command) bool { return true }, do: func(_ context.Context, cmd sandbox.Command) error {
		_, err := cmd.Stdout.Write([]byte("airlock-probe 00 tar chmod\n"))
		return err
	}}
	_, err := stage.NewBridge(r).Probe(context.Background(), "/rt", []string{"a"})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.ErrorContains(t, err, "the sandbox lacks tar chmod")
}

// floodReader is a FileReader whose every file holds data; it runs no
// shell.
type floodReader struct{ data []byte }

func (floodReader) Run(context.Context, sandbox.Command) error {
	return errors.New("floodReader runs no shell")
}

func (f floodReader) ReadFile(_ context.Context, _ string, max int64) ([]byte, error) {
	if int64(len(f.data)) > max {
		return nil, sandbox.ErrLimit
	}
	return f.data, nil
}

// TestBridgeProbeFilesFlood: manifests read through a FileReader that hold
// more than MaxProbeBytes together break the protocol (ErrProtocol, not a
// transport failure).
func TestBridgeProbeFilesFlood(t *testing.T) {
	big := make([]byte, stage.MaxManifestBytes/2+1)
	_, err := stage.NewBridge(floodReader{big}).Probe(t.Context(), "/rt", []string{"a", "b", "c"})
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
	assert.ErrorContains(t, err, "reading the stored manifests under /rt: the sandbox's manifests hold more than")
}
