package stage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

func TestDirConformance(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		d, err := stage.NewDir(t.TempDir())
		require.NoError(t, err)
		return d, "/home/agent/.airlock/rt"
	})
}

func TestBridgeConformance(t *testing.T) {
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		dir := t.TempDir()
		return stage.NewBridge(stage.LocalRunner(dir)), filepath.ToSlash(filepath.Join(dir, "home", "agent", "rt"))
	})
}
