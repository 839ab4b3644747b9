package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/sandbox"
)

// TestControlLeavesNoOrphans: a control step's deadline watchdog is reaped
// by the wrapper that started it. In a container whose PID 1 does not reap
// (docker run … sleep infinity), every process the wrapper leaves behind
// becomes a zombie for the container's life, one per control step: an
// outside tester counted ten `[sleep]` zombies after ten Control calls.
// The test binary, run again as a child subreaper, stands in for that PID
// 1: whatever the steps orphan is re-parented to it and stays, zombie or
// not, where the test can count it.
func TestControlLeavesNoOrphans(t *testing.T) {
	if os.Getenv("AIRLOCK_ORPHAN_HELPER") != "" {
		orphanHelper()
		return
	}
	h := exec.Command(os.Args[0], "-test.run=^TestControlLeavesNoOrphans$")
	h.Env = append(os.Environ(), "AIRLOCK_ORPHAN_HELPER=1")
	out, err := h.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "orphans: none\n")
}

// orphanHelper runs control steps as a child subreaper and prints what
// they left: "orphans: none", or each process's pid, state and command.
func orphanHelper() {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Println("prctl:", err)
		os.Exit(2)
	}
	r := sandbox.Exec()
	for i := range 3 {
		if err := sandbox.Control(context.Background(), r, sandbox.Command{Script: "true"}); err != nil {
			fmt.Println("control", i, err)
			os.Exit(2)
		}
	}
	// What a step leaves has its wrapper's lifetime plus a kill's: give it
	// a second to go away, which a process reaped by its own parent does.
	var left []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = children()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) == 0 {
		fmt.Println("orphans: none")
		return
	}
	fmt.Println("orphans:", strings.Join(left, "; "))
}

// children lists this process's child processes from /proc: pid, state,
// command.
func children() []string {
	me := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // gone meanwhile
		}
		line := string(b)
		i := strings.LastIndexByte(line, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+1:]) // state, ppid, …
		if len(f) > 1 && f[1] == me {
			out = append(out, fmt.Sprintf("%s %s %s", filepath.Base(filepath.Dir(s)), f[0], line[:i+1]))
		}
	}
	return out
}
