package stagetest_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/stagetest"
)

// A Target's package runs the conformance suite from one of its own tests.
// newTarget returns a fresh, empty sandbox per subtest and the root to stage
// under; WithSandboxShell lets the suite plant links where a sandbox process
// could. (An example cannot be handed a *testing.T, so this one only
// compiles; stage's own TestBridgeConformance runs exactly this.)
func ExampleTestTarget() {
	testBridgeConformance := func(t *testing.T) {
		stagetest.TestTarget(t, func(t *testing.T) (stage.Target, string) {
			dir := t.TempDir()
			return stage.NewBridge(sandbox.Local(dir)), filepath.ToSlash(filepath.Join(dir, "home", "agent", "rt"))
		}, stagetest.WithSandboxShell(func(*testing.T, stage.Target) (sandbox.Runner, string) {
			// This Bridge's sandbox is this machine: its paths are the host's.
			return sandbox.Local("/"), ""
		}))
	}
	_ = testBridgeConformance // in a real package: func TestBridgeConformance(t *testing.T) { ... }
}

// A Runner's package runs the runner suite the same way: newRunner returns a
// Runner for each subtest. (Compiled only, as above; stage's
// TestLocalRunnerConformance runs it.)
func ExampleTestRunner() {
	testLocalRunnerConformance := func(t *testing.T) {
		stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner {
			return sandbox.Local(t.TempDir())
		})
	}
	_ = testLocalRunnerConformance // in a real package: func TestLocalRunnerConformance(t *testing.T) { ... }
}
