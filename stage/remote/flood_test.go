package remote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

// floodingSandbox runs every command through the Host, except the asset
// listing, which a hostile sandbox answers with names without end.
type floodingSandbox struct{ sandbox.Runner }

func (f floodingSandbox) Run(ctx context.Context, cmd sandbox.Command) error {
	if strings.Contains(cmd.Script, `printf '%s\0'`) {
		cmd.Script = `while :; do printf '%s\0' .airlock-manifest-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.json; done`
	}
	return f.Runner.Run(ctx, cmd)
}

// TestBridgeAssetsFloodOverSSH: over SSH a stdout the host refuses stops
// being read, so the flooding command would never end; the listing's
// bound stops it at once, and the error is the sandbox's broken protocol,
// not a transport failure at the control deadline.
func TestBridgeAssetsFloodOverSSH(t *testing.T) {
	srv := remotetest.NewServer(t)
	h := dial(t, srv)
	start := time.Now()
	_, err := stage.NewBridge(floodingSandbox{h}, stage.WithControlTimeout(20*time.Second)).Assets(t.Context(), "/rt")
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
	assert.False(t, sandbox.Retryable(err), "%v", err)
	assert.ErrorContains(t, err, "listing the assets under /rt")
	assert.Less(t, time.Since(start), 10*time.Second, "%v", err)
	// The connection is still usable.
	_, err = h.Assets(t.Context(), "/no-such-root")
	require.NoError(t, err)
}
