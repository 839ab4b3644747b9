package treetest

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// BindMount mounts the directory from at to (an existing directory) for
// the rest of the test, as a container's bind mount shows a host
// directory at another path. It needs root: elsewhere the test is skipped,
// saying so.
func BindMount(t testing.TB, from, to string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root (CI runs as root)")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(from, &st); err != nil {
		t.Fatalf("stat %s: %v", from, err)
	}
	if err := syscall.Mount(from, to, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("bind mounts are not permitted here (%v): CI runs as root on a VM", err)
		}
		t.Fatalf("bind mount of %s at %s: %v", from, to, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(to, syscall.MNT_DETACH); err == nil {
			return
		}
		// The mount point was moved (a test that failed moved the copy
		// holding it away): unmount wherever from is mounted now.
		info, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Errorf("unmounting %s: %v", to, err)
			return
		}
		for line := range strings.SplitSeq(string(info), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			// The kernel's escapes, decoded as internal/shell does (which
			// treetest cannot import: internal/tree's tests would cycle).
			mp := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(f[4])
			var now syscall.Stat_t
			if syscall.Stat(mp, &now) == nil && now.Dev == st.Dev && now.Ino == st.Ino && mp != from {
				if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
					t.Errorf("unmounting %s (the mount of %s, moved from %s): %v", mp, from, to, err)
				}
			}
		}
	})
}
