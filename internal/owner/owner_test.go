//go:build unix

package owner

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// zombie starts a child of a shell that never reaps it and returns the
// zombie's pid (the shell is killed at cleanup, which lets init reap it).
func zombie(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 1 & echo $!; exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(buf[:n-1]))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, st, ok := stat(pid); ok && st == 'Z' {
			return pid
		}
		if time.Now().After(deadline) {
			t.Skip("no zombie appeared (no procfs?)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAliveAndGone(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no procfs: zombies and reused pids cannot be told here")
	}
	self := Tag()
	if !Alive(self) || Gone(os.Getpid()) {
		t.Errorf("this process: Alive(%q) = %v, Gone = %v", self, Alive(self), Gone(os.Getpid()))
	}
	if pid, start, ok := Parse(self); !ok || pid != os.Getpid() || start == 0 {
		t.Errorf("Parse(%q) = %d, %d, %v", self, pid, start, ok)
	}
	if parent := TagOf(os.Getppid()); !Alive(parent) {
		t.Errorf("the parent %q is not alive", parent)
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if tag := TagOf(dead.Process.Pid); Alive(tag) || !Gone(dead.Process.Pid) {
		t.Errorf("a reaped process %q: Alive = %v, Gone = %v", tag, Alive(tag), Gone(dead.Process.Pid))
	}

	z := zombie(t)
	if tag := TagOf(z); Alive(tag) || !Gone(z) {
		t.Errorf("a zombie %q: Alive = %v, Gone = %v", tag, Alive(tag), Gone(z))
	}

	// The same pid with another start time is another process.
	pid, start, _ := Parse(self)
	if reused := strconv.Itoa(pid) + "." + strconv.FormatUint(start+1, 10); Alive(reused) {
		t.Errorf("a reused pid %q counts as alive", reused)
	}

	for _, bad := range []string{"", "x", "12", "12.", ".5", "-1.0", "0.0", "012.5", "12.05", "12.5.6"} {
		if Alive(bad) {
			t.Errorf("Alive(%q) = true for a string that is no tag", bad)
		}
	}
	if Gone(0) || Gone(-1) {
		t.Error("pid <= 0 must never be gone")
	}
}
