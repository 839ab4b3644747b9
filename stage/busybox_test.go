package stage_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockdev/airlock/internal/busyboxuser"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// TestBridgeConformanceBusyboxUser runs the Target conformance suite over
// a Bridge whose sandbox is a minimal container's: busybox's tools only,
// as a non-root user. busybox tar then leaves the mode of a directory
// that already exists alone, which the staged copy's directory modes must
// not depend on (a read-only directory, and the directories the carry
// makes before the stream arrives).
func TestBridgeConformanceBusyboxUser(t *testing.T) {
	bb := busyboxuser.New(t)
	stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
		dir := busyboxuser.Dir(t)
		return stage.NewBridge(bb.Runner(dir)), filepath.ToSlash(filepath.Join(dir, "home", "agent", "rt"))
	}, stagetest.WithSandboxShell(func(*testing.T, stage.Target) (sandbox.Runner, string) {
		return bb.Runner("/"), ""
	}))
}
