package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

// TestExecClientDiesWithHost: when the host process dies (SIGKILL, no
// chance to clean up), the kernel kills the exec client it started (the
// parent-death signal). The host here is this test binary run again as a
// helper.
func TestExecClientDiesWithHost(t *testing.T) {
	if os.Getenv("AIRLOCK_EXEC_HELPER") != "" {
		execHelper()
		return
	}
	dir := t.TempDir()
	h := exec.Command(os.Args[0], "-test.run=^TestExecClientDiesWithHost$")
	h.Env = append(os.Environ(), "AIRLOCK_EXEC_HELPER="+dir)
	require.NoError(t, h.Start())
	client := readPid(t, filepath.Join(dir, "client"))
	script := readPid(t, filepath.Join(dir, "script"))
	killGroupAtEnd(t, script)
	require.NoError(t, syscall.Kill(client, 0), "the client is not running")
	require.NoError(t, h.Process.Kill())
	_ = h.Wait()
	assert.Eventually(t, func() bool { return syscall.Kill(client, 0) != nil || isZombie(client) }, 5*time.Second, 20*time.Millisecond,
		"the exec client %d outlived the host that started it", client)
}

// execHelper runs a long command through Exec, telling the test the
// client's pid and the script's, and waits to be killed.
func execHelper() {
	dir := os.Getenv("AIRLOCK_EXEC_HELPER")
	r := sandbox.ExecWith(sandbox.ExecOptions{Environ: []string{"PATH=/usr/bin:/bin", "PF=" + filepath.Join(dir, "client")}},
		"sh", "-c", `echo $$ >"$PF"; exec "$@"`, "sh")
	_ = r.Run(context.Background(), sandbox.Command{Script: `echo $$ >"$SF"; sleep 60`, Env: map[string]string{"SF": filepath.Join(dir, "script")}})
	time.Sleep(time.Minute)
}
