//go:build linux && airlock_attack_fail

package stage_test

// An attack that breaks the Index's guarantee (Stage returns nil while the
// sandbox copy differs from the Source) by design: a blind spot the Index's
// doc names. Built only with -tags airlock_attack_fail, because it fails:
//
//	go test -tags airlock_attack_fail -run TestAtkFail ./stage

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
)

// atkMapping is a shared, writable mapping of a Source file that a host
// process (an editor, a build tool, a database) keeps open.
type atkMapping struct {
	f *os.File
	m []byte
}

// atkMap maps p shared and writable for the test's duration.
func atkMap(t *testing.T, p string) *atkMapping {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, syscall.Munmap(m))
		assert.NoError(t, f.Close())
	})
	return &atkMapping{f: f, m: m}
}

// TestAtkFailMmapDirtyPage: a host process writes a Source file through a
// shared mapping, the Source is staged with an Index (the default racy
// window: the file last changed more than 2 s before), and the process
// writes the mapped page again. The page was still dirty, so the second
// write does not fault and the kernel moves neither the modification nor
// the change time (ext4 and tmpfs on Linux 6.18; the file's stamp is
// checked below). The next Stage with the Index returns nil and keeps the
// old bytes in the sandbox — through the record (nothing else changed:
// Reused) and through the stamps (another file changed too: the mapped
// file is trusted). The Index doc's "a write moves the change time, which
// only the kernel sets" does not hold for a write through a mapping whose
// page is already dirty; a Stage without an Index sends the new bytes.
func TestAtkFailMmapDirtyPage(t *testing.T) {
	type env struct {
		name  string
		sb    sbox
		src   string
		ix    *stage.Index
		m     *atkMapping
		other bool // also change another file: the stamps path, not the record
	}
	var envs []*env
	for _, other := range []bool{false, true} {
		for _, k := range sandboxes {
			e := &env{name: k.name, sb: k.new(t), src: t.TempDir(), ix: stage.NewIndex(), other: other}
			build(t, e.src, "mapped=version 1\n", "plain=unchanged\n")
			e.m = atkMap(t, filepath.Join(e.src, "mapped"))
			copy(e.m.m, "VERSION 1") // the page is dirty from now on
			envs = append(envs, e)
		}
	}
	time.Sleep(atkDefaultWindow)
	for _, e := range envs {
		_, err := stage.Stage(context.Background(), e.sb, e.sb.root, []stage.Asset{{Name: "s", Source: e.src}}, stage.WithIndex(e.ix))
		require.NoError(t, err)
		require.Equal(t, "VERSION 1\n", readFile(t, filepath.Join(e.sb.hostRoot, "s", "mapped")))
	}
	for _, e := range envs {
		p := filepath.Join(e.src, "mapped")
		before := atkStampOf(t, p)
		copy(e.m.m, "VERSION 2")
		require.Equal(t, before, atkStampOf(t, p), "precondition: the write through the dirty page kept the stamp")
		require.Equal(t, "VERSION 2\n", readFile(t, p))
		if e.other {
			require.NoError(t, os.WriteFile(filepath.Join(e.src, "plain"), []byte("changed\n"), 0o644))
		}
	}
	for _, e := range envs {
		name := e.name + map[bool]string{false: "/record", true: "/stamps"}[e.other]
		t.Run(name, func(t *testing.T) {
			as := []stage.Asset{{Name: "s", Source: e.src}}
			rt, err := stage.Stage(context.Background(), e.sb, e.sb.root, as, stage.WithIndex(e.ix))
			require.NoError(t, err)
			t.Logf("with the Index: Reused %v, Sent %d", rt.Assets[0].Reused, rt.Assets[0].Sent)
			assert.Equal(t, "VERSION 2\n", readFile(t, filepath.Join(e.sb.hostRoot, "s", "mapped")), "the sandbox copy after a Stage with the Index that returned nil")

			// The control: without the Index the same Stage sends the file.
			rt, err = stage.Stage(context.Background(), e.sb, e.sb.root, as)
			require.NoError(t, err)
			t.Logf("without an Index: Reused %v, Sent %d", rt.Assets[0].Reused, rt.Assets[0].Sent)
			sameTree(t, e.src, filepath.Join(e.sb.hostRoot, "s"))
		})
	}
}
