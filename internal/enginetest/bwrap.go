package enginetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BwrapPath is where NeedBwrap looks for bubblewrap first (Debian's
// bubblewrap package); PATH is searched after it.
const BwrapPath = "/usr/bin/bwrap"

// BwrapConfig describes a bubblewrap sandbox for BwrapArgs.
type BwrapConfig struct {
	Work string // host directory, writable, seen at the same path, the working directory
	Tmp  string // host directory seen at /tmp, so that it lasts from one call to the next; "" means a fresh tmpfs per call
	// SharePIDs keeps the host's PID namespace. Each bwrap call is a
	// sandbox of its own: with a PID namespace of its own (the default), a
	// second call cannot see the first's processes, so Exec's kill by run
	// id cannot reach them (--die-with-parent kills them with the client
	// instead) and stagetest.TestRunner's check that a cancelled command
	// left no process, made from a second call, would look at another
	// namespace's pids. The conformance run shares the namespace for that.
	SharePIDs bool
}

// BwrapArgs returns the argv prefix, ending in "--", of an isolated
// bubblewrap sandbox whose one writable directory (but /tmp) is c.Work:
// every namespace unshared (no network; a new PID namespace unless
// c.SharePIDs), no capability (--cap-drop ALL: as root, the sandboxed
// process could otherwise remount a read-only bind writable), killed with
// its parent, in a new session (no TIOCSTI into the caller's terminal), an
// empty environment but PATH, HOME=c.Work and TMPDIR=/tmp. /usr is bound
// read-only with the host's top-level links into it (/bin, /lib, …) or,
// where the host has real directories, read-only binds of those, and
// /etc/alternatives (links into /usr: awk is one) when there is one;
// /proc and /dev are the sandbox's own. Nothing else of the host is there:
// not the rest of /etc, /home, /root, nor the test's files outside c.Work
// and c.Tmp.
func BwrapArgs(bwrap string, c BwrapConfig) []string {
	args := []string{bwrap, "--unshare-user-try", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"}
	if !c.SharePIDs {
		args = append(args, "--unshare-pid")
	}
	args = append(args, "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", c.Work, "--setenv", "TMPDIR", "/tmp",
		"--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives")
	for _, top := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		p := "/" + top
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev")
	if c.Tmp != "" {
		args = append(args, "--bind", c.Tmp, "/tmp")
	} else {
		args = append(args, "--tmpfs", "/tmp")
	}
	return append(args, "--bind", c.Work, c.Work, "--chdir", c.Work, "--")
}

var bwrapProbe struct {
	once sync.Once
	bin  string
	err  error
}

// NeedBwrap returns the path of bwrap after checking, once per process,
// that it makes the sandbox BwrapArgs describes on this machine (the
// kernel may refuse its namespaces); it skips tb, saying what is missing,
// otherwise.
func NeedBwrap(tb testing.TB) string {
	tb.Helper()
	p := &bwrapProbe
	p.once.Do(func() { p.bin, p.err = probeBwrap() })
	if p.err != nil {
		tb.Skipf("enginetest: %v", p.err)
	}
	return p.bin
}

// Bwrap returns BwrapArgs for work (an existing host directory) and a
// fresh /tmp of tb's that lasts across calls, skipping tb when bwrap does
// not work here.
func Bwrap(tb testing.TB, work string) []string {
	tb.Helper()
	return BwrapArgs(NeedBwrap(tb), BwrapConfig{Work: work, Tmp: tb.TempDir()})
}

// BwrapSharedPIDs is Bwrap with BwrapConfig.SharePIDs: for the suites that
// check, from a second call, which processes a first one left.
func BwrapSharedPIDs(tb testing.TB, work string) []string {
	tb.Helper()
	return BwrapArgs(NeedBwrap(tb), BwrapConfig{Work: work, Tmp: tb.TempDir(), SharePIDs: true})
}

// probeBwrap finds bwrap and runs a script in the sandbox BwrapArgs
// makes, checking that it writes its work directory and has no network
// device but lo.
func probeBwrap() (string, error) {
	bin := BwrapPath
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("bwrap"); err != nil {
			return "", errors.New("bwrap is not installed (apt-get install bubblewrap) — .ci/run installs it")
		}
	}
	work, err := os.MkdirTemp("", "airlock-bwrap-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := append(BwrapArgs(bin, BwrapConfig{Work: work}), "sh", "-c", `echo ok > probe && tail -n +3 /proc/net/dev | cut -d: -f1`)
	out, err := run(ctx, nil, argv[0], argv[1:]...)
	if err != nil {
		return "", fmt.Errorf("bwrap cannot make its sandbox on this machine (user or PID namespaces refused?): %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "probe")); err != nil || string(b) != "ok\n" {
		return "", fmt.Errorf("bwrap's sandbox did not write its work directory %s (%q, %v)", work, b, err)
	}
	if devs := strings.Fields(out); len(devs) > 1 {
		return "", fmt.Errorf("bwrap's sandbox sees network devices %v; --unshare-all did not unshare the network", devs)
	}
	return bin, nil
}
