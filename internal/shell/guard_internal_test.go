package shell

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownIdentity: U, which ends a publish or removal whose G could
// not tell a directory's identity, says a missing tool (UncheckedIDsExit)
// only while the directory is there; one that went away meanwhile (another
// connection's stage or unstage moved it) is a race, RenameExit, which the
// host reports as retryable.
func TestUnknownIdentity(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			dir := t.TempDir()
			for _, c := range []struct {
				path   string
				status int
				says   string
			}{
				{dir, UncheckedIDsExit, "neither stat nor ls"},
				{filepath.Join(dir, "gone"), RenameExit, "went away while its identity was checked"},
			} {
				cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", statIDFunc+`U "$1"`, "sh", c.path)...)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != c.status {
					t.Fatalf("U %s: %v, want exit %d; output %s", c.path, err, c.status, out)
				}
				if !strings.Contains(string(out), c.says) || !strings.Contains(string(out), c.path) {
					t.Errorf("U %s says %q, want it to name the path and say %q", c.path, out, c.says)
				}
			}
		})
	}
}
