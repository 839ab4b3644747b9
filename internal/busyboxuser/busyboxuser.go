// Package busyboxuser runs sandbox scripts the way a minimal container
// does: busybox's applets only (no GNU tools on PATH), as an unprivileged
// user. Tests use it to run the shell protocol against busybox as a
// non-root user on any machine where they run as root (CI does), since
// busybox's tools behave differently as root (tar, for one, then sets the
// mode of a directory that already exists; as a user it does not).
package busyboxuser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
)

// UID and GID are the user scripts run as.
const (
	UID = 1000
	GID = 1000
)

// Env is a prepared busybox user: the applet directory its scripts have as
// PATH and a home directory it owns.
type Env struct {
	bb, bin, home, scripts string
	n                      atomic.Int64
}

// New prepares an Env, or skips t naming what is missing: root (to switch
// users), busybox, or setpriv (util-linux).
func New(t testing.TB) *Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("busyboxuser: needs root to run scripts as uid 1000 (run the tests as root, as CI does)")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busyboxuser: busybox is not installed (apt-get install busybox-static)")
	}
	if _, err := os.Stat(setpriv); err != nil {
		t.Skipf("busyboxuser: %s (util-linux) is missing: %v", setpriv, err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busyboxuser: %s --list: %v", bb, err)
	}
	e := &Env{bb: bb, scripts: Dir(t), home: Dir(t)}
	if err := os.Chown(e.scripts, 0, 0); err != nil { // the user may read its scripts, not change them
		t.Fatal(err)
	}
	e.bin = filepath.Join(e.scripts, "bin")
	if err := os.Mkdir(e.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(string(out)) {
		if err := os.Symlink(bb, filepath.Join(e.bin, a)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// setpriv switches to the user.
const setpriv = "/usr/bin/setpriv"

// Dir returns a new empty directory the user owns, mode 0755, in
// os.TempDir() (which the user must be able to search), removed when t
// ends.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "busyboxuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chown(d, UID, GID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Runner returns a Runner whose scripts run in dir (sandbox.Local's
// contract) under busybox sh as the user, with only the applets on PATH
// and HOME the user's.
func (e *Env) Runner(dir string) sandbox.Runner {
	return runner{e: e, local: sandbox.Local(dir, sandbox.WithEnviron([]string{"PATH=" + e.bin, "HOME=" + e.home, "TMPDIR=" + e.home}))}
}

type runner struct {
	e     *Env
	local sandbox.Runner
}

// Run writes the script to a file the user can read (so that its length
// is no argument's) and runs it.
func (r runner) Run(ctx context.Context, cmd sandbox.Command) error {
	f := filepath.Join(r.e.scripts, fmt.Sprintf("script-%d", r.e.n.Add(1)))
	if err := os.WriteFile(f, []byte(cmd.Script), 0o644); err != nil {
		return fmt.Errorf("%w: busyboxuser: writing the script: %v", sandbox.ErrTransport, err)
	}
	defer os.Remove(f)
	cmd.Script = fmt.Sprintf("exec %s --reuid %d --regid %d --clear-groups -- %s sh '%s'", setpriv, UID, GID, r.e.bb, f)
	return r.local.Run(ctx, cmd)
}
