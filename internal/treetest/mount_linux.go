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

// Tmpfs mounts a tmpfs of the given size (mount(8)'s size= value: "1m")
// on a fresh directory for the rest of the test, for a full file system.
// It needs root: elsewhere the test is skipped, saying so.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs (a full file system) needs root (CI runs as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("mounting a tmpfs is not permitted here (%v): CI runs as root on a VM", err)
		}
		t.Fatalf("mount -t tmpfs -o size=%s %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH) // already failing: do not leave it mounted
		}
	})
	return dir
}
