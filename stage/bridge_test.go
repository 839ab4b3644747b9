package stage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// scriptedRunner passes commands to a real runner, except those that match
// a rule, which it handles itself.
type scriptedRunner struct {
	next  sandbox.Runner
	match func(sandbox.Command) bool
	do    func(ctx context.Context, cmd sandbox.Command) error
	mu    sync.Mutex
	log   []sandbox.Command // every command run, whole
}

func (s *scriptedRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	s.mu.Lock()
	s.log = append(s.log, cmd)
	s.mu.Unlock()
	if s.match(cmd) {
		return s.do(ctx, cmd)
	}
	return s.next.Run(ctx, cmd)
}

func (s *scriptedRunner) commands() []sandbox.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sandbox.Command(nil), s.log...)
}

// Recognizers for the bridge's commands.
var (
	isProbe = func(c sandbox.Command) bool { return strings.Contains(c.Script, `exec tar -c -f - "$@"`) }
	// The send command makes the temporary directory and takes the stream:
	// it is both isSetup and isTransfer.
	isSetup    = func(c sandbox.Command) bool { return strings.Contains(c.Script, "mkdir -m 700") }
	isTransfer = func(c sandbox.Command) bool { return c.Stdin != nil && strings.Contains(c.Script, "tar -x") }
	isPublish  = func(c sandbox.Command) bool { return strings.Contains(c.Script, "transfer incomplete") }
	isCleanup  = func(c sandbox.Command) bool { return strings.Contains(c.Script, `R "$o" "$d"; then`) }
	isFetch    = func(c sandbox.Command) bool { return strings.Contains(c.Script, "exec tar -c -f - .") }
)

// hang blocks until the test ends, ignoring ctx, like a provider that never
// honours its own timeout.
func hang(t *testing.T) func(context.Context, sandbox.Command) error {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(context.Context, sandbox.Command) error {
		<-release
		return nil
	}
}

// TestBridgeHangingRunner runs each bridge command through a Runner that
// never returns, ignoring its context. A control command must fail with
// ErrTransport within the control timeout; the data commands (transfer,
// fetch) must return within the caller's deadline plus a second. The
// uncertain command is never replayed and nothing follows it.
func TestBridgeHangingRunner(t *testing.T) {
	cases := []struct {
		name   string
		match  func(sandbox.Command) bool
		caller time.Duration // the caller's deadline; 0: none
		verify bool          // stage twice, the second time WithVerify (so that Fetch runs)
	}{
		{name: "Probe", match: isProbe},
		{name: "Setup", match: isSetup},
		{name: "Transfer", match: isTransfer, caller: 500 * time.Millisecond},
		{name: "Publish", match: isPublish},
		{name: "Cleanup", match: isCleanup},
		{name: "Fetch", match: isFetch, caller: 500 * time.Millisecond, verify: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "f=x")
			root := filepath.Join(dir, "rt")
			assets := []stage.Asset{{Name: "a", Source: src}}
			var opts []stage.Option
			if c.verify {
				_, err := stage.Stage(context.Background(), stage.NewBridge(sandbox.Local(dir)), root, assets)
				require.NoError(t, err)
				opts = append(opts, stage.WithVerify())
			}
			r := &scriptedRunner{next: sandbox.Local(dir), match: c.match, do: hang(t)}
			if c.name == "Cleanup" {
				// Make the transfer fail so that a cleanup runs.
				r.match = func(cmd sandbox.Command) bool { return isTransfer(cmd) || isCleanup(cmd) }
				h := hang(t)
				r.do = func(ctx context.Context, cmd sandbox.Command) error {
					if isTransfer(cmd) {
						// The directory is made, then tar fails.
						if _, err := io.WriteString(cmd.Stdout, "airlock-ready\n"); err != nil {
							return err
						}
						return &sandbox.ExitError{Status: 2}
					}
					return h(ctx, cmd)
				}
			}
			b := stage.NewBridge(r, stage.WithControlTimeout(time.Second))
			ctx, limit := context.Background(), b.ControlTimeout()+time.Second
			if c.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.caller)
				defer cancel()
				limit = c.caller + time.Second
			}
			start := time.Now()
			res := make(chan error, 1)
			go func() {
				_, err := stage.Stage(ctx, b, root, assets, opts...)
				res <- err
			}()
			var err error
			select {
			case err = <-res:
			case <-time.After(limit + 3*time.Second):
				t.Fatalf("Stage still running %s after it started", limit+3*time.Second)
			}
			took := time.Since(start)
			assert.ErrorIs(t, err, sandbox.ErrTransport)
			if c.caller > 0 {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline ended the wait")
			}
			assert.Less(t, took, limit, "Stage must return within its deadline + 1s")
			t.Log(err)

			cmds := r.commands()
			hung := -1
			for i, cmd := range cmds {
				if c.match(cmd) && (c.name != "Cleanup" || isCleanup(cmd)) {
					assert.Equal(t, -1, hung, "the uncertain command must not be replayed")
					hung = i
				}
			}
			require.NotEqual(t, -1, hung, "the hanging command never ran")
			for _, cmd := range cmds[hung+1:] {
				assert.False(t, isCleanup(cmd), "no cleanup may follow an uncertain %s", c.name)
				t.Errorf("a command was sent after the uncertain %s: %q", c.name, cmd.Script)
			}
			if c.name == "Transfer" {
				assert.ErrorContains(t, err, ".airlock-tmp-a-", "the error names the temporary directory left behind")
			}
		})
	}
}

// TestBridgeCancelDuringSetup cancels the caller's context while the setup
// command's result is on its way back: the temporary directory it created
// must still be removed.
func TestBridgeCancelDuringSetup(t *testing.T) {
	for _, c := range []struct {
		name string
		// run performs the setup and reports; cancel is the caller's.
		run func(ctx context.Context, local sandbox.Runner, cmd sandbox.Command, cancel func()) error
	}{
		{"ReportsAfterCancel", func(ctx context.Context, local sandbox.Runner, cmd sandbox.Command, cancel func()) error {
			if err := local.Run(ctx, cmd); err != nil {
				return err
			}
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}},
		{"RunsAfterCancel", func(_ context.Context, local sandbox.Runner, cmd sandbox.Command, cancel func()) error {
			// A provider that ignores ctx and runs the command late.
			cancel()
			time.Sleep(100 * time.Millisecond)
			return local.Run(context.Background(), cmd)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "f=x")
			local := sandbox.Local(dir)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &scriptedRunner{next: local, match: isSetup, do: func(ctx context.Context, cmd sandbox.Command) error {
				return c.run(ctx, local, cmd, cancel)
			}}
			root := filepath.Join(dir, "rt")
			_, err := stage.Stage(ctx, stage.NewBridge(r, stage.TwoSessions()), root, []stage.Asset{{Name: "a", Source: src}})
			assert.ErrorIs(t, err, context.Canceled)
			assert.False(t, errors.Is(err, sandbox.ErrTransport), "%v", err)
			assertNoTemp(t, root)
			_, err = os.Lstat(filepath.Join(root, "a"))
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing may be published")
			cmds := r.commands()
			require.NotEmpty(t, cmds)
			assert.True(t, isCleanup(cmds[len(cmds)-1]), "the last command removes the temporary directory")
		})
	}
}

func TestBridgeControlTimeoutClamp(t *testing.T) {
	cases := []struct {
		in, want time.Duration
	}{
		{time.Second, time.Second},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{sandbox.MaxControlTimeout, sandbox.MaxControlTimeout},
		{sandbox.MaxControlTimeout + time.Nanosecond, sandbox.MaxControlTimeout},
		{time.Hour, sandbox.MaxControlTimeout},
		{0, sandbox.MaxControlTimeout},
		{-time.Second, sandbox.MaxControlTimeout},
	}
	for _, c := range cases {
		t.Run(c.in.String(), func(t *testing.T) {
			assert.Equal(t, c.want, stage.NewBridge(sandbox.Local(t.TempDir()), stage.WithControlTimeout(c.in)).ControlTimeout())
		})
	}
	assert.Equal(t, sandbox.MaxControlTimeout, stage.NewBridge(sandbox.Local(t.TempDir())).ControlTimeout(), "default")
}

// TestBridgeControlEnforcedOnHost checks that a larger configured timeout is
// clamped in practice: a hanging Control returns ErrTransport at the
// configured deadline, not later, even though the runner ignores ctx.
func TestBridgeControlEnforcedOnHost(t *testing.T) {
	r := &scriptedRunner{match: func(sandbox.Command) bool { return true }, do: hang(t)}
	b := stage.NewBridge(r, stage.WithControlTimeout(300*time.Millisecond))
	start := time.Now()
	err := b.Control(context.Background(), sandbox.Command{Script: "true"})
	assert.ErrorIs(t, err, sandbox.ErrTransport)
	assert.InDelta(t, 300*time.Millisecond, time.Since(start), float64(500*time.Millisecond))
}

// slowReader waits delay before its first read.
type slowReader struct {
	r     io.Reader
	delay time.Duration
	once  sync.Once
}

func (s *slowReader) Read(p []byte) (int, error) {
	s.once.Do(func() { time.Sleep(s.delay) })
	return s.r.Read(p)
}

// TestBridgeTransferNotBoundByControlDeadline makes the data transfer take
// several control deadlines: it must still succeed.
func TestBridgeTransferNotBoundByControlDeadline(t *testing.T) {
	dir := t.TempDir()
	src := t.TempDir()
	build(t, src, "f=x")
	local := sandbox.Local(dir)
	r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
		// The directory is made at once; the stream then takes two and a
		// half control deadlines to arrive. (The deadline is 1 s, not less:
		// the control steps around the stream must fit in it on a loaded
		// machine, which 150 ms did not always.)
		cmd.Stdin = &slowReader{r: cmd.Stdin, delay: 2500 * time.Millisecond}
		return local.Run(ctx, cmd)
	}}
	b := stage.NewBridge(r, stage.WithControlTimeout(time.Second))
	rt, err := stage.Stage(context.Background(), b, filepath.Join(dir, "rt"), []stage.Asset{{Name: "a", Source: src}})
	require.NoError(t, err)
	assert.Equal(t, "x", readFile(t, filepath.Join(dir, "rt", "a", "f")))
	assert.False(t, rt.Assets[0].Reused)
}

func TestBridgeErrors(t *testing.T) {
	boom := errors.New("connection reset")
	cases := []struct {
		name      string
		match     func(sandbox.Command) bool
		do        func(ctx context.Context, cmd sandbox.Command) error
		transport bool
		status    int
		either    bool // ErrTransport or the publish's completeness check, depending on pipe buffering
		protocol  bool // the sandbox broke the protocol: ErrProtocol, not ErrTransport
	}{
		{"ProbeExit", isProbe, func(context.Context, sandbox.Command) error { return &sandbox.ExitError{Status: 7} }, false, 7, false, false},
		{"ProbeTransport", isProbe, func(context.Context, sandbox.Command) error { return boom }, true, 0, false, false},
		{"ProbeGarbage", isProbe, func(_ context.Context, c sandbox.Command) error {
			_, err := fmt.Fprint(c.Stdout, "M 5\nab")
			return err
		}, false, 0, false, true},
		{"SetupExit", isSetup, func(context.Context, sandbox.Command) error { return &sandbox.ExitError{Status: 1} }, false, 1, false, false},
		{"TransferExit", isTransfer, func(context.Context, sandbox.Command) error { return &sandbox.ExitError{Status: 2} }, false, 2, false, false},
		{"TransferTransport", isTransfer, func(context.Context, sandbox.Command) error { return boom }, true, 0, false, false},
		{"TransferStopsEarly", isTransfer, func(context.Context, sandbox.Command) error { return nil }, true, 0, true, false},
		{"PublishExit", isPublish, func(context.Context, sandbox.Command) error { return &sandbox.ExitError{Status: 3} }, false, 3, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "f=x")
			r := &scriptedRunner{next: sandbox.Local(dir), match: c.match, do: c.do}
			_, err := stage.Stage(context.Background(), stage.NewBridge(r), filepath.Join(dir, "rt"), []stage.Asset{{Name: "a", Source: src}})
			require.Error(t, err)
			if c.either && !errors.Is(err, sandbox.ErrTransport) {
				assert.ErrorContains(t, err, "transfer incomplete")
			} else {
				assert.Equal(t, c.transport, errors.Is(err, sandbox.ErrTransport), "ErrTransport: %v", err)
			}
			assert.Equal(t, c.protocol, errors.Is(err, sandbox.ErrProtocol), "ErrProtocol: %v", err)
			var ee *sandbox.ExitError
			if c.status != 0 {
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, c.status, ee.Status)
			}
			assertNoTemp(t, filepath.Join(dir, "rt"))
			_, err = os.Lstat(filepath.Join(dir, "rt", "a"))
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing may be published")
		})
	}
}

// TestBridgeTruncatedTransfer cuts the tar stream at every kind of point: the
// publish must refuse the incomplete transfer and keep the previous copy.
func TestBridgeTruncatedTransfer(t *testing.T) {
	for _, tc := range []struct {
		cut int64
		end error
	}{
		{0, io.EOF}, {512, io.EOF}, {1024, io.EOF}, {1536, io.EOF}, {4096, io.EOF}, {10000, io.EOF}, {10240, io.EOF},
		{512, errors.New("pipe closed")}, {10000, errors.New("pipe closed")},
	} {
		cut := tc.cut
		t.Run(fmt.Sprint(cut, tc.end), func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "a=old", "b=old")
			root := filepath.Join(dir, "rt")
			local := sandbox.Local(dir)
			_, err := stage.Stage(context.Background(), stage.NewBridge(local), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			build(t, src, "c="+strings.Repeat("new", 3000))
			var truncated atomic.Bool
			r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
				cmd.Stdin = &cutReader{r: cmd.Stdin, n: cut, end: tc.end, hit: &truncated}
				return local.Run(ctx, cmd)
			}}
			_, err = stage.Stage(context.Background(), stage.NewBridge(r), root, []stage.Asset{{Name: "x", Source: src}})
			require.True(t, truncated.Load())
			assert.Error(t, err)
			t.Log(err)
			assert.Equal(t, []string{"a", "b"}, listDir(t, filepath.Join(root, "x")), "the previous copy must stay")
			assertNoTemp(t, root)
		})
	}
}

// TestBridgePublishChecksCompleteness lets the host send the whole stream
// but hands tar only a prefix that ends on a member boundary, so that tar
// itself succeeds: the publish command must notice and refuse, at every
// boundary.
func TestBridgePublishChecksCompleteness(t *testing.T) {
	const members = 8 // new/, new/tree/, a, b, new/manifest.json, old/, modes, complete
	for k := range members - 1 {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			dir := t.TempDir()
			src := t.TempDir()
			build(t, src, "a=old", "b=old")
			root := filepath.Join(dir, "rt")
			local := sandbox.Local(dir)
			_, err := stage.Stage(context.Background(), stage.NewBridge(local), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			build(t, src, "a=new", "b=new") // both changed: nothing is carried over, both travel
			r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
				// The host sends the stream once the command reports that
				// its directory is ready: run it, and hand tar the prefix.
				in := cmd.Stdin
				pr, pw := io.Pipe()
				cmd.Stdin = pr
				go func() {
					all, err := io.ReadAll(in)
					if err != nil {
						pw.CloseWithError(err)
						return
					}
					ends := memberEnds(t, all)
					if len(ends) != members {
						pw.CloseWithError(fmt.Errorf("the stream has %d members, want %d", len(ends), members))
						return
					}
					_, err = pw.Write(all[:ends[k]])
					pw.CloseWithError(err)
				}()
				return local.Run(ctx, cmd)
			}}
			_, err = stage.Stage(context.Background(), stage.NewBridge(r, stage.TwoSessions()), root, []stage.Asset{{Name: "x", Source: src}})
			var ee *sandbox.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 3, ee.Status, "the publish command's completeness check: %v", err)
			assert.ErrorContains(t, err, "transfer incomplete")
			assert.Equal(t, "old", readFile(t, filepath.Join(root, "x", "a")), "the previous copy must stay")
			assertNoTemp(t, root)
		})
	}
}

// memberEnds returns the offset just after each member of a USTAR stream.
func memberEnds(t *testing.T, data []byte) []int {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var ends []int
	off := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ends
		}
		require.NoError(t, err)
		off += 512 + int((h.Size+511)/512*512)
		ends = append(ends, off)
	}
}

// cutReader ends its stream after n bytes with end: io.EOF as if the
// sender had finished, another error as if the pipe had broken.
type cutReader struct {
	r   io.Reader
	n   int64
	end error
	hit *atomic.Bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.hit.Store(true)
		return 0, c.end
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

func TestLocalRunner(t *testing.T) {
	dir := t.TempDir()
	r := sandbox.Local(dir)
	t.Run("EnvNotInArgv", func(t *testing.T) {
		var out strings.Builder
		err := r.Run(context.Background(), sandbox.Command{
			Script: `printf '%s|' "$AIRLOCK_SECRET"; if [ -r /proc/$$/cmdline ]; then tr '\0' ' ' < /proc/$$/cmdline; else ps -o args= -p $$; fi`,
			Env:    map[string]string{"AIRLOCK_SECRET": "hunter2"},
			Stdout: &out,
		})
		require.NoError(t, err)
		value, argv, _ := strings.Cut(out.String(), "|")
		assert.Equal(t, "hunter2", value)
		assert.NotContains(t, argv, "hunter2")
		assert.Contains(t, argv, "/bin/sh")
	})
	t.Run("BadEnvName", func(t *testing.T) {
		err := r.Run(context.Background(), sandbox.Command{Script: "true", Env: map[string]string{"A=B": "x"}})
		assert.Error(t, err)
	})
	t.Run("Dir", func(t *testing.T) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
		for _, c := range []struct{ dir, want string }{{"", dir}, {"sub", filepath.Join(dir, "sub")}, {"/", "/"}} {
			var out strings.Builder
			require.NoError(t, r.Run(context.Background(), sandbox.Command{Script: "pwd -P", Dir: c.dir, Stdout: &out}))
			want, err := filepath.EvalSymlinks(c.want)
			require.NoError(t, err)
			assert.Equal(t, want, strings.TrimSpace(out.String()))
		}
	})
	t.Run("Stdin", func(t *testing.T) {
		var out strings.Builder
		require.NoError(t, r.Run(context.Background(), sandbox.Command{Script: "cat", Stdin: strings.NewReader("in"), Stdout: &out}))
		assert.Equal(t, "in", out.String())
	})
	t.Run("ExitStatus", func(t *testing.T) {
		var stderr strings.Builder
		err := r.Run(context.Background(), sandbox.Command{Script: "echo oops >&2; exit 3", Stderr: &stderr})
		var ee *sandbox.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 3, ee.Status)
		assert.Equal(t, "oops\n", stderr.String())
		assert.False(t, errors.Is(err, sandbox.ErrTransport))
	})
	t.Run("CancelKillsChildren", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var out strings.Builder
		start := time.Now()
		// The child holds stdout open: without the group kill, Run would
		// wait for it.
		err := r.Run(ctx, sandbox.Command{Script: "sleep 30 & echo started; wait", Stdout: &out})
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, "started\n", out.String())
	})
}

// TestBridgeCommandsDoNotGrowWithFiles stages a changed asset of 3 files and
// one of 300: both cost the same three commands (probe; one data command
// that makes the temporary directory and takes the whole tree as a tar
// stream; publish), and no script carries file content.
func TestBridgeCommandsDoNotGrowWithFiles(t *testing.T) {
	for _, c := range []struct {
		files int
		opts  []stage.BridgeOption
		want  int
	}{{3, nil, 2}, {300, nil, 2}, {3, []stage.BridgeOption{stage.TwoSessions()}, 3}, {300, []stage.BridgeOption{stage.TwoSessions()}, 3}} {
		files := c.files
		t.Run(fmt.Sprint(files, c.want), func(t *testing.T) {
			src, dir := t.TempDir(), t.TempDir()
			for i := range files {
				build(t, src, fmt.Sprintf("d%d/f%03d=content-%d", i%7, i, i))
			}
			var scripts []string
			var mu sync.Mutex
			r := recordingRunner{Runner: sandbox.Local(dir), record: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				scripts = append(scripts, s)
			}}
			_, err := stage.Stage(context.Background(), stage.NewBridge(r, c.opts...), filepath.Join(dir, "rt"), []stage.Asset{{Name: "a", Source: src}})
			require.NoError(t, err)
			assert.Len(t, scripts, c.want, "probe, send (and publish: with a tar that stops at its archive's end, the send command publishes)")
			for _, s := range scripts {
				assert.NotContains(t, s, "content-", "file content never travels in a script")
				assert.NotContains(t, s, "base64")
			}
		})
	}
}

type recordingRunner struct {
	sandbox.Runner
	record func(script string)
}

func (r recordingRunner) Run(ctx context.Context, cmd sandbox.Command) error {
	r.record(cmd.Script)
	return r.Runner.Run(ctx, cmd)
}
