package stage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

func TestDirConformance(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		d, err := stage.NewDir(t.TempDir())
		require.NoError(t, err)
		return d, "/home/agent/.airlock/rt"
	}, stagetest.WithSandboxShell(func(t *testing.T, target stage.Target) (sandbox.Runner, string) {
		// The sandbox's "/" is the directory; its processes run on this
		// machine.
		dir := target.(*stage.Dir).Path()
		return sandbox.Local(dir), dir
	}))
}

func TestBridgeConformance(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		dir := t.TempDir()
		return stage.NewBridge(sandbox.Local(dir)), filepath.ToSlash(filepath.Join(dir, "home", "agent", "rt"))
	}, stagetest.WithSandboxShell(func(*testing.T, stage.Target) (sandbox.Runner, string) {
		// The Bridge's sandbox is this machine: its paths are the host's.
		return sandbox.Local("/"), ""
	}))
}

func TestLocalRunnerConformance(t *testing.T) {
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.Local(t.TempDir()) })
}
