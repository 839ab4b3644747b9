package stage

import (
	"context"
	"time"

	"github.com/airlockdev/airlock/sandbox"
)

// Sandbox is a sandbox a host both stages into and runs commands in: what
// a run hands to Stage (a Target) and to workspace, deliverable and the
// agent (a sandbox.Runner), as one value. *remote.Host (package
// stage/remote) is one; Over makes one of any sandbox.Runner.
type Sandbox interface {
	Target
	sandbox.Runner
}

// Over returns a Sandbox that runs commands through r and stages through a
// Bridge over r, made with opts (NewBridge(r, opts...)): the one value an
// adapter for a command-only provider (sandbox.Exec over kubectl or docker,
// an SDK's Runner) passes wherever a Target or a Runner is wanted.
//
// The result keeps what the Bridge offers (Pruner, so WithPrune and
// Unstage work; Control) and what a run's other consumers look for on a
// Runner: it is a sandbox.ControlTimeouter reporting the Bridge's control
// deadline (ControlDeadline(r), or shorter with WithControlTimeout), so
// every package bounds its control steps the same way, and it is a
// sandbox.FileReader exactly when r is one (ReadFile is r's). Any other
// method of r is not carried over: type-assert r itself for it.
func Over(r sandbox.Runner, opts ...BridgeOption) Sandbox {
	b := NewBridge(r, opts...)
	s := &bridged{Bridge: b, r: b.r} // a nil r: the Bridge's stand-in, which fails every call
	if fr, ok := r.(sandbox.FileReader); ok {
		return &bridgedReader{bridged: s, fr: fr}
	}
	return s
}

// bridged is Over's Sandbox: a Bridge over r, and r.
type bridged struct {
	*Bridge
	r sandbox.Runner
}

var (
	_ Sandbox                  = (*bridged)(nil)
	_ Pruner                   = (*bridged)(nil)
	_ sandbox.ControlTimeouter = (*bridged)(nil)
	_ Sandbox                  = (*bridgedReader)(nil)
	_ sandbox.FileReader       = (*bridgedReader)(nil)
)

// Run implements sandbox.Runner: r runs cmd.
func (s *bridged) Run(ctx context.Context, cmd sandbox.Command) error { return s.r.Run(ctx, cmd) }

// ControlTimeout implements sandbox.ControlTimeouter: the Bridge's control
// deadline.
func (s *bridged) ControlTimeout() time.Duration { return s.Bridge.timeout }

// bridgedReader is Over's Sandbox over a Runner that is a FileReader.
type bridgedReader struct {
	*bridged
	fr sandbox.FileReader
}

// ReadFile implements sandbox.FileReader: r reads the file.
func (s *bridgedReader) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	return s.fr.ReadFile(ctx, p, max)
}
