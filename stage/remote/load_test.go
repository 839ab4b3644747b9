package remote_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The load test measures what one remote.Host costs the process that
// holds it: heap, stacks, RSS and goroutines per idle connection and per
// concurrent stage. The sandboxes are served out of process, so every byte
// measured is the client's: by a remotetest server in a child process (this
// test binary re-run as TestLoadServer), or by a real sshd
// (internal/sshdtest) with AIRLOCK_LOAD_SERVER=sshd; one server, N
// connections.
//
// TestLoadPerConnection runs in every `go test` (N=10) and bounds the cost
// of an idle connection. AIRLOCK_LOAD=1,50,100,200 runs TestLoadScale over
// those N and logs one line per N (go test -run TestLoadScale -v).

// loadShape is treegen.Standard scaled down: 2 skills x 10 files of
// 0.5–4 KiB.
var loadShape = treegen.Shape{Dirs: 2, Files: 10, MinBytes: 512, MaxBytes: 4 << 10, Seed: 1}

// idleConnBudget bounds the heap and stack an idle Host may hold (the issue's
// target), measured after a first stage and a GC.
const idleConnBudget = 2 << 20

// memPoint is the process's memory at one moment.
type memPoint struct {
	heap  uint64 // HeapInuse
	stack uint64 // StackInuse
	rss   uint64 // VmRSS
	gor   int
}

func (p memPoint) mem() uint64 { return p.heap + p.stack }

// readMem measures the process after a GC that returns free memory to the
// OS (gc) or as it is.
func readMem(t testing.TB, gc bool) memPoint {
	t.Helper()
	if gc {
		runtime.GC()
		debug.FreeOSMemory() // a GC that also returns the free pages: RSS as an idle process's
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := procStatus(t)
	return memPoint{heap: ms.HeapInuse, stack: ms.StackInuse, rss: rss, gor: runtime.NumGoroutine()}
}

// procStatus returns VmRSS and VmHWM in bytes.
func procStatus(t testing.TB) (rss, hwm uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// resetHWM resets VmHWM to the current RSS (Linux: clear_refs 5); it
// reports whether it could.
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// loadResult is one run's measurements.
type loadResult struct {
	n                   int
	base, idle, staged  memPoint
	peak                memPoint // highest heap+stack and goroutines sampled during the concurrent stages; rss is VmHWM
	stageWall, dialWall time.Duration
}

func per(a, b uint64, n int) float64 { return (float64(a) - float64(b)) / float64(n) }

func (r loadResult) String() string {
	const mib = 1 << 20
	n := r.n
	return fmt.Sprintf("N=%d dial %v stage %v | idle/conn: heap %.0f KiB stack %.0f KiB rss %.0f KiB gor %.1f | after stage+GC/conn: heap %.0f KiB stack %.0f KiB rss %.0f KiB gor %.1f | peak during stages/conn: heap+stack %.0f KiB rss(HWM) %.0f KiB gor %.1f | totals: idle heap+stack %.1f MiB, peak heap+stack %.1f MiB, peak rss %.1f MiB",
		n, r.dialWall.Round(time.Millisecond), r.stageWall.Round(time.Millisecond),
		per(r.idle.heap, r.base.heap, n)/1024, per(r.idle.stack, r.base.stack, n)/1024, per(r.idle.rss, r.base.rss, n)/1024, float64(r.idle.gor-r.base.gor)/float64(n),
		per(r.staged.heap, r.base.heap, n)/1024, per(r.staged.stack, r.base.stack, n)/1024, per(r.staged.rss, r.base.rss, n)/1024, float64(r.staged.gor-r.base.gor)/float64(n),
		per(r.peak.mem(), r.base.mem(), n)/1024, per(r.peak.rss, r.base.rss, n)/1024, float64(r.peak.gor-r.base.gor)/float64(n),
		float64(r.idle.mem())/mib, float64(r.peak.mem())/mib, float64(r.peak.rss)/mib)
}

// runLoad dials n Hosts to srv, stages src through all of them at once,
// and measures the process at each step. Every Host is closed before it
// returns, and the goroutines must come back to the baseline.
func runLoad(t *testing.T, srv loadTarget, src string, n int) loadResult {
	t.Helper()
	raiseNoFile(t, uint64(4*n+256))
	r := loadResult{n: n}
	r.base = readMem(t, true)

	hosts := make([]*remote.Host, n)
	defer func() {
		for _, h := range hosts {
			if h != nil {
				if err := h.Close(); err != nil {
					t.Errorf("closing a Host: %v", err)
				}
			}
		}
	}()
	// At most 16 handshakes at a time: sshd drops unauthenticated
	// connections beyond MaxStartups.
	// The Hosts' warnings (a keepalive that went unanswered) explain a
	// failed stage.
	var warnings syncBuffer
	cfg := srv.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// One machine serving every sandbox can starve a connection of CPU for
	// longer than a keepalive waits (seen with 200 stages of the standard
	// tree on 2 shared cores); AIRLOCK_LOAD_KEEPALIVE (a duration)
	// lengthens it for such a run.
	if v := os.Getenv("AIRLOCK_LOAD_KEEPALIVE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("AIRLOCK_LOAD_KEEPALIVE=%q: %v", v, err)
		}
		cfg.KeepAlive = d
	}
	start := time.Now()
	err := forN(n, 16, func(i int) error {
		h, err := remote.Dial(t.Context(), srv.addr, cfg)
		hosts[i] = h
		return err
	})
	if err != nil {
		t.Fatalf("N=%d: dial: %v", n, err)
	}
	r.dialWall = time.Since(start)
	r.idle = readMem(t, true)

	// Every Host stages at once; a sampler keeps the highest heap+stack
	// and goroutine count, and VmHWM the highest RSS.
	hwm := resetHWM()
	stop := make(chan struct{})
	var peak memPoint
	var sampled sync.WaitGroup
	sampled.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			p := readMem(t, false)
			if p.mem() > peak.mem() {
				peak.heap, peak.stack = p.heap, p.stack
			}
			peak.gor = max(peak.gor, p.gor)
			peak.rss = max(peak.rss, p.rss)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	start = time.Now()
	var reused atomic.Int64
	err = forN(n, n, func(i int) error {
		root := path.Join(srv.dir, fmt.Sprintf("load-%d-%d", n, i))
		rt, err := stage.Stage(t.Context(), hosts[i], root, []stage.Asset{{Name: "skills", Source: src}})
		if err == nil && rt.Assets[0].Reused {
			reused.Add(1)
		}
		return err
	})
	r.stageWall = time.Since(start)
	close(stop)
	sampled.Wait()
	if err != nil {
		t.Fatalf("N=%d: concurrent stages after %v: %v\nthe Hosts' warnings:\n%s", n, r.stageWall, err, warnings.String())
	}
	if reused.Load() != 0 {
		t.Fatalf("N=%d: %d stages reused a copy; every root is fresh", n, reused.Load())
	}
	if _, h := procStatus(t); hwm && h > peak.rss {
		peak.rss = h
	}
	r.peak = peak
	r.staged = readMem(t, true)

	for i, h := range hosts {
		if err := h.Close(); err != nil {
			t.Errorf("closing Host %d: %v", i, err)
		}
		hosts[i] = nil
	}
	// Every goroutine a Host started ends with Close.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > r.base.gor && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > r.base.gor {
		t.Errorf("N=%d: %d goroutines after closing every Host, %d before dialing", n, g, r.base.gor)
	}
	return r
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// forN runs fn(0..n-1) with at most par at a time and returns the first
// error.
func forN(n, par int, fn func(i int) error) error {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				once.Do(func() { first = fmt.Errorf("#%d: %w", i, err) })
			}
		})
	}
	wg.Wait()
	return first
}

// raiseNoFile raises the soft open-file limit to at least want (up to the
// hard limit) for the test: each Host holds one socket, and each stage
// reads its source through descriptors.
func raiseNoFile(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur >= want {
		return
	}
	old := lim
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit NOFILE %d: %v", lim.Cur, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// loadSource writes the tree every Host stages: loadShape, or the
// treegen shape AIRLOCK_LOAD_SHAPE names (standard, pages).
func loadSource(t *testing.T) string {
	t.Helper()
	shape := loadShape
	if name := os.Getenv("AIRLOCK_LOAD_SHAPE"); name != "" {
		s, ok := treegen.Shapes[name]
		if !ok {
			t.Fatalf("AIRLOCK_LOAD_SHAPE=%q: not a treegen shape", name)
		}
		shape = s
	}
	src := t.TempDir()
	if _, err := treegen.Write(src, shape); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestLoadPerConnection holds 10 idle Hosts to one sshd after each staged
// a small tree, and checks that each costs the process less than
// idleConnBudget of heap and stack, and that closing them ends every
// goroutine they started.
func TestLoadPerConnection(t *testing.T) {
	srv := startLoadTarget(t)
	src := loadSource(t)
	const n = 10
	r := runLoad(t, srv, src, n)
	t.Log(r)
	if got := per(r.staged.mem(), r.base.mem(), n); got > idleConnBudget {
		t.Errorf("an idle Host after a stage holds %.0f KiB of heap and stack, more than %d KiB", got/1024, idleConnBudget>>10)
	}
	if got := per(r.idle.mem(), r.base.mem(), n); got > idleConnBudget {
		t.Errorf("an idle Host holds %.0f KiB of heap and stack, more than %d KiB", got/1024, idleConnBudget>>10)
	}
}

// TestLoadScale runs the load over each N of AIRLOCK_LOAD (a comma
// separated list, e.g. 1,50,100,200) against one sshd and logs one line
// per N; memory per connection must stay within idleConnBudget at every
// N (linear in N).
func TestLoadScale(t *testing.T) {
	spec := os.Getenv("AIRLOCK_LOAD")
	if spec == "" {
		t.Skip("set AIRLOCK_LOAD=1,50,100,200 to run the load over those connection counts")
	}
	var ns []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("AIRLOCK_LOAD=%q: %q is not a positive count", spec, f)
		}
		ns = append(ns, n)
	}
	srv := startLoadTarget(t)
	src := loadSource(t)
	for _, n := range ns {
		r := runLoad(t, srv, src, n)
		t.Log(r)
		if got := per(r.staged.mem(), r.base.mem(), n); got > idleConnBudget {
			t.Errorf("N=%d: an idle Host after a stage holds %.0f KiB of heap and stack, more than %d KiB", n, got/1024, idleConnBudget>>10)
		}
	}
}

// loadTarget is where the load's Hosts connect: one server out of process.
type loadTarget struct {
	addr string
	cfg  remote.Config
	dir  string // a directory of the server's the Hosts stage into
}

// startLoadTarget starts the server of AIRLOCK_LOAD_SERVER: "sshd" (a real
// sshd; the test is skipped without one, as every sshdtest test is) or, by
// default, a remotetest server in a child process.
func startLoadTarget(t *testing.T) loadTarget {
	t.Helper()
	switch k := os.Getenv("AIRLOCK_LOAD_SERVER"); k {
	case "sshd":
		srv := sshdtest.Start(t)
		return loadTarget{addr: srv.Addr(), cfg: srv.Config(), dir: srv.Dir()}
	case "", "remotetest":
		return startChildServer(t)
	default:
		t.Fatalf("AIRLOCK_LOAD_SERVER=%q: want sshd or remotetest", k)
		panic("unreachable")
	}
}

// loadChildEnv makes TestLoadServer serve (in the child process).
const loadChildEnv = "AIRLOCK_LOAD_CHILD"

// startChildServer re-runs this test binary as TestLoadServer, which
// starts a remotetest server and an ssh-agent holding its client key, and
// prints where they listen; the child ends when its stdin closes (at the
// end of t).
func startChildServer(t *testing.T) loadTarget {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadServer$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), loadChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the server process: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the server process: %v", err)
		}
	})
	got := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == "READY" {
			break
		}
		got[k] = v
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	for _, k := range []string{"ADDR", "HOSTKEY", "AGENT", "DIR", "USER"} {
		if got[k] == "" {
			t.Fatalf("the server process printed no %s line (got %q; scan: %v)", k, got, sc.Err())
		}
	}
	conn, err := net.Dial("unix", got["AGENT"])
	if err != nil {
		t.Fatalf("the server process's agent: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	signers, err := agent.NewClient(conn).Signers()
	if err != nil || len(signers) != 1 {
		t.Fatalf("the server process's agent: %d keys, %v", len(signers), err)
	}
	hk, err := remote.FixedHostKey(got["HOSTKEY"])
	if err != nil {
		t.Fatal(err)
	}
	return loadTarget{
		addr: got["ADDR"],
		cfg:  remote.Config{User: got["USER"], Auth: []ssh.AuthMethod{ssh.PublicKeys(signers...)}, HostKeyCallback: hk},
		dir:  got["DIR"],
	}
}

// TestLoadServer is the server process of startChildServer: without
// AIRLOCK_LOAD_CHILD=1 it does nothing. It serves a remotetest server and
// an ssh-agent holding its client key (ClientSigner: in memory only) until
// its stdin closes.
func TestLoadServer(t *testing.T) {
	if os.Getenv(loadChildEnv) != "1" {
		return // run by startChildServer only
	}
	raiseNoFile(t, 1<<16)
	srv, err := remotetest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := srv.Config()
	signers := []ssh.Signer{srv.ClientSigner()}
	sock := filepath.Join(t.TempDir(), "agent")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = agent.ServeAgent(signerAgent{signers[0]}, c)
			}()
		}
	}()
	fmt.Printf("ADDR %s\nHOSTKEY %sDIR %s\nUSER %s\nAGENT %s\nREADY\n",
		srv.Addr(), ssh.MarshalAuthorizedKey(srv.HostKey()), srv.Dir(), cfg.User, sock)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// signerAgent is an ssh-agent that holds one signer and signs with it.
type signerAgent struct{ s ssh.Signer }

func (a signerAgent) List() ([]*agent.Key, error) {
	pk := a.s.PublicKey()
	return []*agent.Key{{Format: pk.Type(), Blob: pk.Marshal(), Comment: "remotetest client"}}, nil
}

func (a signerAgent) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	if !bytes.Equal(key.Marshal(), a.s.PublicKey().Marshal()) {
		return nil, errors.New("signerAgent: not my key")
	}
	return a.s.Sign(rand.Reader, data)
}

func (a signerAgent) Signers() ([]ssh.Signer, error) { return []ssh.Signer{a.s}, nil }

func (signerAgent) Add(agent.AddedKey) error   { return errors.New("signerAgent: read-only") }
func (signerAgent) Remove(ssh.PublicKey) error { return errors.New("signerAgent: read-only") }
func (signerAgent) RemoveAll() error           { return errors.New("signerAgent: read-only") }
func (signerAgent) Lock([]byte) error          { return errors.New("signerAgent: read-only") }
func (signerAgent) Unlock([]byte) error        { return errors.New("signerAgent: read-only") }

// TestKeepAliveSlowPeerIsAlive: under load a peer reads slowly, and the
// reply to a keepalive waits behind the data it has yet to read (up to a
// channel window); a peer that keeps sending (window adjustments) is
// alive, and the Host must not close the connection. Here the server
// reads 256 KiB of stdin at 32 KiB/s through a throttling proxy, with a
// keepalive every 200 ms and 5 s to answer each.
func TestKeepAliveSlowPeerIsAlive(t *testing.T) {
	srv := remotetest.NewServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var proxies sync.WaitGroup
	t.Cleanup(proxies.Wait)
	proxies.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		defer s.Close()
		proxies.Go(func() {
			_, _ = io.Copy(c, s)
			c.Close()
		})
		buf := make([]byte, 4<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
				time.Sleep(time.Duration(n) * time.Second / (32 << 10))
			}
			if err != nil {
				return
			}
		}
	})
	var warnings syncBuffer
	cfg := srv.Config()
	cfg.KeepAlive = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := remote.Dial(t.Context(), ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	start := time.Now()
	err = h.Run(t.Context(), sandbox.Command{Script: "cat >/dev/null", Stdin: bytes.NewReader(make([]byte, 256<<10))})
	if err != nil {
		t.Fatalf("a slow peer's command failed after %v: %v\nwarnings:\n%s", time.Since(start), err, warnings.String())
	}
	if w := warnings.String(); w != "" {
		t.Fatalf("warnings:\n%s", w)
	}
	if d := time.Since(start); d < 6*time.Second {
		t.Fatalf("the command took %v: the proxy did not hold the keepalive behind the data for longer than the 5 s it has to answer", d)
	}
}
