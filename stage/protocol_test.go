package stage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	header := []byte("airlock-probe 100\n")
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
		_, err := cmd.Stdout.Write([]byte("airlock-probe 000 tar chmod\n"))
		return err
	}}
	_, err := stage.NewBridge(r).Probe(context.Background(), "/rt", []string{"a"})
	require.ErrorIs(t, err, stage.ErrTool)
	assert.False(t, sandbox.Retryable(err))
	assert.Equal(t, "sandbox tool missing: the sandbox lacks tar chmod, which staging needs (POSIX sh with tar, mkdir, mv, rm, cat and chmod); install it in the sandbox image", err.Error())
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

// flood writes garbage to w in 64 KiB chunks, n bytes in all, and returns
// the first write error (the sandbox's output refused), or nil.
func flood(w io.Writer, n int) error {
	chunk := bytes.Repeat([]byte("flood!\x00\n"), 8<<10)
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// Hostile floods: how a Runner reports a sandbox whose reply floods.
var floods = map[string]func(ctx context.Context, cmd sandbox.Command) error{
	// The Runner passes the refused write's error on (as sandbox.Local
	// does); a reply never refused ends after 8 MiB.
	"refused": func(_ context.Context, cmd sandbox.Command) error {
		return flood(cmd.Stdout, 8<<20)
	},
	// The Runner bounds the output itself (an engine's own limit) and
	// reports the break.
	"bounded": func(_ context.Context, cmd sandbox.Command) error {
		_ = flood(cmd.Stdout, 1<<20) // refused or not, the Runner's own bound ends it
		return fmt.Errorf("%w: the engine's reply exceeds its bound", sandbox.ErrProtocol)
	},
	// The command never ends once its output is refused (an SSH session
	// whose stdout copy failed stops reading the channel), until the
	// Runner's context ends: then it reports a transport failure.
	"stuck": func(ctx context.Context, cmd sandbox.Command) error {
		_ = flood(cmd.Stdout, 8<<20)
		<-ctx.Done()
		return fmt.Errorf("%w: the session was stopped: %w", sandbox.ErrTransport, ctx.Err())
	},
}

// TestBridgeFloodIsProtocol: a sandbox whose reply floods, however the
// Runner reports it, fails the operation with ErrProtocol (hostile or
// broken, never retryable, never a transport failure), naming the path,
// and a refused reply stops the command rather than waiting out the
// control deadline. Remove reads nothing but the published line: only a
// Runner that reports the break itself makes its flood an error.
func TestBridgeFloodIsProtocol(t *testing.T) {
	dir := t.TempDir()
	root := filepath.ToSlash(filepath.Join(dir, "rt"))
	src := t.TempDir()
	build(t, src, "f=x")
	isAssets := func(c sandbox.Command) bool { return strings.Contains(c.Script, `printf '%s\0'`) }
	isRemove := func(c sandbox.Command) bool { return strings.Contains(c.Script, "unstage") }
	ops := []struct {
		name   string
		match  func(sandbox.Command) bool
		floods []string
		run    func(ctx context.Context, b *stage.Bridge) error
		path   string
	}{
		{"Assets", isAssets, []string{"refused", "bounded", "stuck"}, func(ctx context.Context, b *stage.Bridge) error {
			_, err := b.Assets(ctx, root)
			return err
		}, "listing the assets under " + root},
		{"Probe", isProbe, []string{"refused", "bounded", "stuck"}, func(ctx context.Context, b *stage.Bridge) error {
			_, err := b.Probe(ctx, root, []string{"a"})
			return err
		}, "reading the stored manifests under " + root},
		{"Fetch", isFetch, []string{"refused", "bounded", "stuck"}, func(ctx context.Context, b *stage.Bridge) error {
			return b.Fetch(ctx, root, "a", func(stage.Entry, io.Reader) error { return nil })
		}, "fetching " + root + "/a"},
		{"Publish", isTransfer, []string{"refused", "bounded", "stuck"}, func(ctx context.Context, b *stage.Bridge) error {
			_, err := stage.Stage(ctx, b, root, []stage.Asset{{Name: "a", Source: src}})
			return err
		}, root + "/.airlock-tmp-a-"},
		{"Remove", isRemove, []string{"bounded"}, func(ctx context.Context, b *stage.Bridge) error {
			return b.Remove(ctx, root, []string{"a"})
		}, "removing assets under " + root},
	}
	for _, op := range ops {
		for _, kind := range op.floods {
			t.Run(op.name+"/"+kind, func(t *testing.T) {
				r := &scriptedRunner{next: sandbox.Local(dir), match: op.match, do: floods[kind]}
				b := stage.NewBridge(r, stage.WithControlTimeout(20*time.Second))
				start := time.Now()
				err := op.run(t.Context(), b)
				require.Error(t, err)
				assert.ErrorIs(t, err, sandbox.ErrProtocol)
				assert.False(t, errors.Is(err, sandbox.ErrTransport), "a flood is no transport failure: %v", err)
				assert.False(t, sandbox.Retryable(err), "a hostile sandbox is not retryable: %v", err)
				assert.ErrorContains(t, err, op.path)
				assert.NotContains(t, err.Error(), "free space", "the host's disk is not the problem")
				assert.Less(t, time.Since(start), 10*time.Second, "the flood must stop the command, not wait out the control deadline: %v", err)
			})
		}
	}
}

// TestBridgeAssetsFloodLocal: a sandbox whose shell lists manifest names
// without end through sandbox.Local: the listing stops at its bound, the
// command is stopped, and the error is the sandbox's broken protocol.
func TestBridgeAssetsFloodLocal(t *testing.T) {
	dir := t.TempDir()
	endless := sandbox.Command{Script: `while :; do printf '%s\0' .airlock-manifest-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.json; done`}
	r := &scriptedRunner{next: sandbox.Local(dir), match: func(c sandbox.Command) bool { return strings.Contains(c.Script, `printf '%s\0'`) },
		do: func(ctx context.Context, cmd sandbox.Command) error {
			endless.Stdout, endless.Stderr = cmd.Stdout, cmd.Stderr
			return sandbox.Local(dir).Run(ctx, endless)
		}}
	start := time.Now()
	_, err := stage.NewBridge(r, stage.WithControlTimeout(20*time.Second)).Assets(t.Context(), "/rt")
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
	assert.False(t, sandbox.Retryable(err), "%v", err)
	assert.ErrorContains(t, err, "listing the assets under /rt: sandbox output exceeds its limit: more than 4194304 bytes")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestBridgeHostErrorKeepsClass: a Runner's failure on the host's side
// (an *fs.PathError: the host could not write the script's temporary
// file, or the output) is passed through, not made a transport failure,
// so that sandbox.Retryable answers from its errno: a full disk is not
// retryable, an interrupted call is.
func TestBridgeHostErrorKeepsClass(t *testing.T) {
	dir := t.TempDir()
	src := t.TempDir()
	build(t, src, "f=x")
	root := filepath.ToSlash(filepath.Join(dir, "rt"))
	ops := map[string]func(ctx context.Context, b *stage.Bridge) error{
		"Assets": func(ctx context.Context, b *stage.Bridge) error { _, err := b.Assets(ctx, root); return err },
		"Probe": func(ctx context.Context, b *stage.Bridge) error {
			_, err := b.Probe(ctx, root, []string{"a"})
			return err
		},
		"Remove": func(ctx context.Context, b *stage.Bridge) error { return b.Remove(ctx, root, []string{"a"}) },
		"Fetch": func(ctx context.Context, b *stage.Bridge) error {
			return b.Fetch(ctx, root, "a", func(stage.Entry, io.Reader) error { return nil })
		},
		"Stage": func(ctx context.Context, b *stage.Bridge) error {
			_, err := stage.Stage(ctx, b, root, []stage.Asset{{Name: "a", Source: src}})
			return err
		},
	}
	for _, c := range []struct {
		errno     syscall.Errno
		retryable bool
	}{{syscall.ENOSPC, false}, {syscall.EINTR, true}} {
		for name, op := range ops {
			t.Run(name+"/"+c.errno.Error(), func(t *testing.T) {
				r := &scriptedRunner{match: func(sandbox.Command) bool { return true }, do: func(context.Context, sandbox.Command) error {
					return fmt.Errorf("sandbox: writing a script to /host/tmp/airlock-script-1.sh: %w", &fs.PathError{Op: "write", Path: "/host/tmp/airlock-script-1.sh", Err: c.errno})
				}}
				err := op(t.Context(), stage.NewBridge(r))
				require.ErrorIs(t, err, c.errno)
				assert.False(t, errors.Is(err, sandbox.ErrTransport), "the host's own failure is no transport failure: %v", err)
				assert.Equal(t, c.retryable, sandbox.Retryable(err), "%v", err)
				assert.ErrorContains(t, err, "/host/tmp/airlock-script-1.sh")
			})
		}
	}
	// A transport failure stays one; an error the Runner does not classify
	// is taken for one.
	for _, rerr := range []error{fmt.Errorf("%w: connection reset", sandbox.ErrTransport), errors.New("engine: something broke")} {
		r := &scriptedRunner{match: func(sandbox.Command) bool { return true }, do: func(context.Context, sandbox.Command) error { return rerr }}
		_, err := stage.NewBridge(r).Assets(t.Context(), root)
		require.ErrorIs(t, err, sandbox.ErrTransport, "%v", rerr)
		assert.True(t, sandbox.Retryable(err), "%v", err)
	}
}

// TestBridgeLocalScriptFileFails: through sandbox.Local, an unstage whose
// script is too long for an argument travels in a temporary file; a
// TMPDIR that does not exist fails it with the host's error, naming the
// directory, and not as a retryable transport failure.
func TestBridgeLocalScriptFileFails(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(t.TempDir(), "no-such-tmp")
	t.Setenv("TMPDIR", missing)
	names := make([]string, 2000)
	for i := range names {
		names[i] = fmt.Sprintf("asset-%04d-%s", i, strings.Repeat("x", 40))
	}
	err := stage.NewBridge(sandbox.Local(dir)).Remove(t.Context(), filepath.ToSlash(filepath.Join(dir, "rt")), names)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
	assert.False(t, sandbox.Retryable(err), "%v", err)
	assert.ErrorContains(t, err, missing)
}
