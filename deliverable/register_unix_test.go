//go:build unix

package deliverable_test

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

func TestRegisterFIFODoesNotHang(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.ws, "pipe.csv"), 0o644))
	req := requestFor("pipe.csv", "k", []byte("a"))

	ws := local(t, f.ws)
	done := make(chan error, 1)
	go func() {
		_, err := f.reg.Register(t.Context(), ws, "t", "r", req)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, deliverable.ErrPathDenied)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "pipe.csv", pe.Path)
	case <-time.After(10 * time.Second):
		t.Fatal("Register blocked on a FIFO")
	}
}
