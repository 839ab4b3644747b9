package sandbox_test

import (
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/stagetest"
)

func TestExecConformance(t *testing.T) {
	stagetest.TestRunner(t, func(t *testing.T) sandbox.Runner { return sandbox.Exec() })
}
