package stage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// deltaRunners are two shell sandboxes for a Bridge, each returning its
// Runner and a stage root inside it: the host's own tools ("local") and
// busybox's alone as a non-root user ("busybox"; skipped, naming what is
// missing, without root or busybox).
var deltaRunners = map[string]func(t *testing.T) (sandbox.Runner, string){
	"local": func(t *testing.T) (sandbox.Runner, string) {
		host := t.TempDir()
		return sandbox.Local(host), filepath.Join(host, "rt")
	},
	"busybox": func(t *testing.T) (sandbox.Runner, string) {
		bb := busyboxuser.New(t)
		dir := busyboxuser.Dir(t)
		return bb.Runner(dir), filepath.Join(dir, "home", "agent", "rt")
	},
}

// restageOne writes content to rel in src, then stages src as the asset
// "a" under root through b, and returns what Stage reports of it.
func restageOne(t *testing.T, b *stage.Bridge, root, src, rel, content string) stage.StagedAsset {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(src, filepath.FromSlash(rel)), []byte(content), 0o644))
	rt, err := stage.Stage(context.Background(), b, filepath.ToSlash(root), []stage.Asset{{Name: "a", Source: src}})
	require.NoError(t, err)
	return rt.Assets[0]
}

// TestDeltaCarriesDashNames: a file whose name starts with "-" (at the top
// of the tree, where the carry names it as it is) is carried by a delta
// like any other: linked while its stamps vouch for it, and copied and
// hashed (as ./NAME, which no tool reads as an option) once they no longer
// do. It used to be sent with every delta. Over the host's GNU tools and
// over busybox's (sha256sum instead of openssl), as a non-root user.
func TestDeltaCarriesDashNames(t *testing.T) {
	for name, runner := range deltaRunners {
		t.Run(name, func(t *testing.T) {
			r, root := runner(t)
			src := t.TempDir()
			build(t, src, "-n=dash n\n", "--=two dashes\n", "-d/f=in a dash directory\n", "b=bee\n", "c=0\n")
			b := stage.NewBridge(r)
			restage := func(change string) stage.StagedAsset { return restageOne(t, b, root, src, "c", change) }
			first := restage("1\n")
			require.Equal(t, 5, first.Sent, "the first stage sends every file")

			a := restage("2\n")
			require.Equal(t, 1, a.Sent, "only c changed: the dash names are linked, vouched for by their stamps")

			// Stamps that no longer vouch (a new modification time in the
			// copy, same bytes): the carry copies and hashes the dash names.
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{"-n", "--", "-d/f"} {
				require.NoError(t, os.Chtimes(filepath.Join(root, "a", filepath.FromSlash(p)), old, old))
			}
			a = restage("3\n")
			require.Equal(t, 1, a.Sent, "the dash names' bytes are what the manifest says: carried by hash, not sent")
			for p, want := range map[string]string{"-n": "dash n\n", "--": "two dashes\n", "-d/f": "in a dash directory\n", "b": "bee\n", "c": "3\n"} {
				require.Equal(t, want, readFile(t, filepath.Join(root, "a", filepath.FromSlash(p))), p)
			}

			// A tampered dash name is re-sent, never carried.
			require.NoError(t, os.WriteFile(filepath.Join(root, "a", "-n"), []byte("tampered\n"), 0o644))
			a = restage("4\n")
			require.Equal(t, 2, a.Sent, "c and the tampered -n are sent")
			require.Equal(t, "dash n\n", readFile(t, filepath.Join(root, "a", "-n")))
		})
	}
}

// TestDeltaNewlineNameBesideDash: a name holding a newline is sent with
// every delta, but its unchanged sibling is carried. The sandbox's stamp
// listings used to hold "-n<LF>x" as two lines, the first of them "./-n"
// with that file's stamp: the real -n then had two stamps, the carry
// linked it for the wrong one, the check of the linked tree took it out,
// and it was sent too (an outside helper's finding).
func TestDeltaNewlineNameBesideDash(t *testing.T) {
	// Both orders of creation (a directory lists its names in an order of
	// its own; tmpfs: the newest first), at the top and deeper.
	trees := map[string][]string{
		"top":          {"-n=dash n\n", "-n\nx=newline\n"},
		"top, reverse": {"-n\nx=newline\n", "-n=dash n\n"},
		"deeper":       {"d/-n=dash n\n", "d/-n\nx=newline\n"},
	}
	for name, runner := range deltaRunners {
		for shape, spec := range trees {
			t.Run(name+"/"+shape, func(t *testing.T) {
				r, root := runner(t)
				src := t.TempDir()
				build(t, src, append(spec, "b=bee\n", "c=sea\n", "z=0")...)
				b := stage.NewBridge(r)
				for i := range 3 {
					a := restageOne(t, b, root, src, "z", fmt.Sprint(i))
					if i > 0 {
						require.Equal(t, 2, a.Sent, "stage %d: z and the name holding a newline", i)
					}
					for _, e := range spec {
						p, want, _ := strings.Cut(e, "=")
						require.Equal(t, want, readFile(t, filepath.Join(root, "a", filepath.FromSlash(p))), "stage %d: %q", i, p)
					}
				}
			})
		}
	}
}
