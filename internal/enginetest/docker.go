package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Engine is a container engine's command-line client.
type Engine string

// The container engines the harness knows. Both take the same commands
// (info, import, run, exec, kill, start, rm).
const (
	Docker Engine = "docker"
	Podman Engine = "podman"
)

// engineTimeout bounds every engine command but an image import.
const engineTimeout = 2 * time.Minute

// ownerLabel marks the harness's containers with "<pid>:<start time>" of
// the test binary that started them, so that a later binary can remove
// those a dead one left behind.
const ownerLabel = "airlock.enginetest.owner"

// Need skips tb unless e's client is on PATH and its daemon answers
// `<engine> info`; it returns the client's path.
func (e Engine) Need(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath(string(e))
	if err != nil {
		tb.Skipf("enginetest: %s is not on PATH; install it (and start its daemon) to run the %s tests", e, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := run(ctx, nil, bin, "info", "--format", "{{.ServerVersion}}"); err != nil {
		tb.Skipf("enginetest: `%s info` does not answer (%v); start the %s daemon (or let this user reach it) to run the %s tests", e, err, e, e)
	} else if strings.TrimSpace(out) == "" {
		tb.Skipf("enginetest: `%s info` reports no server version; start the %s daemon to run the %s tests", e, e, e)
	}
	return bin
}

// images caches, per engine, the tag built (or found) by this process.
var images sync.Map // Engine -> *imageOnce

type imageOnce struct {
	once sync.Once
	tag  string
	err  error
}

// Image returns the tag of the harness's image for e, importing it when
// the engine does not have it yet (see the package doc). It skips tb when
// the engine or a tool the image needs is missing.
func (e Engine) Image(tb testing.TB) string {
	tb.Helper()
	bin := e.Need(tb)
	v, _ := images.LoadOrStore(e, &imageOnce{})
	img := v.(*imageOnce)
	img.once.Do(func() { img.tag, img.err = buildImage(bin) })
	if errors.Is(img.err, errMissing) {
		tb.Skipf("%v", img.err)
	}
	if img.err != nil {
		tb.Fatalf("enginetest: building the %s test image: %v", e, img.err)
	}
	return img.tag
}

// buildImage finds or imports the image: the tag is the content hash, and
// the import runs under an exclusive lock on a file in the temporary
// directory, so that concurrent test binaries import it once.
func buildImage(bin string) (string, error) {
	entries, err := rootfs()
	if err != nil {
		return "", err
	}
	tag, err := imageTag(entries)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if hasImage(ctx, bin, tag) {
		return tag, nil
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "airlock-enginetest-"+filepath.Base(bin)+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if hasImage(ctx, bin, tag) {
		return tag, nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, entries)) }()
	_, err = run(ctx, pr, bin, "import", "--change", "ENV PATH=/usr/bin:/bin", "--change", "WORKDIR "+Workdir, "-", tag)
	pr.CloseWithError(errors.New("import ended"))
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", tag, err)
	}
	return tag, nil
}

func hasImage(ctx context.Context, bin, tag string) bool {
	_, err := run(ctx, nil, bin, "image", "inspect", "--format", "{{.Id}}", tag)
	return err == nil
}

// lockFile takes an exclusive flock on p (created if needed) and returns
// its release.
func lockFile(p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the image lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return func() { f.Close() }, nil
}

// run runs bin args with stdin and returns its stdout; a failure carries
// its stderr.
func run(ctx context.Context, stdin io.Reader, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Container is a running container of the harness's image.
type Container struct {
	engine Engine
	bin    string
	id     string
}

// StartContainer starts a container of e's test image (no network, as
// User in Workdir, docker's init as pid 1 reaping orphans, `sleep
// infinity`) and removes it on tb.Cleanup. It skips tb when the engine is
// missing.
func StartContainer(tb testing.TB, e Engine) *Container {
	tb.Helper()
	tag := e.Image(tb)
	bin := e.Need(tb)
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	sweep(ctx, bin)
	var name [6]byte
	rand.Read(name[:])
	out, err := run(ctx, nil, bin, "run", "-d", "--init", "--network", "none", "--user", User, "--workdir", Workdir,
		"--name", "airlock-enginetest-"+hex.EncodeToString(name[:]), "--label", ownerLabel+"="+self(),
		tag, "sleep", "infinity")
	if err != nil {
		tb.Fatalf("enginetest: starting a container: %v", err)
	}
	c := &Container{engine: e, bin: bin, id: strings.TrimSpace(out)}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
		defer cancel()
		if _, err := run(ctx, nil, bin, "rm", "-f", c.id); err != nil {
			tb.Errorf("enginetest: removing container %s: %v", c.id, err)
		}
	})
	c.waitReady(tb)
	return c
}

// ID returns the container's id.
func (c *Container) ID() string { return c.id }

// Argv returns the exec prefix of the container for sandbox.Exec:
// "<engine> exec -i <id>".
func (c *Container) Argv() []string { return []string{string(c.engine), "exec", "-i", c.id} }

// Sh runs script in the container through the engine's client directly
// (not through airlock), as User in Workdir, and returns its stdout; a
// failure fails tb. Tests use it to set up and inspect the sandbox on a
// channel that does not depend on the code under test.
func (c *Container) Sh(tb testing.TB, script string) string {
	tb.Helper()
	return c.sh(tb, User, script)
}

// ShAsRoot is Sh as root in the container: to remove what `docker cp`
// wrote (owned by root), for one.
func (c *Container) ShAsRoot(tb testing.TB, script string) string {
	tb.Helper()
	return c.sh(tb, "0:0", script)
}

func (c *Container) sh(tb testing.TB, user, script string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	out, err := run(ctx, nil, c.bin, "exec", "-i", "-u", user, c.id, "sh", "-c", script)
	if err != nil {
		tb.Fatalf("enginetest: in container %s: %v\nscript:\n%s", c.id, err, script)
	}
	return out
}

// Kill kills the container (`<engine> kill`: SIGKILL to every process in
// it) and waits until the engine reports it stopped; its file system
// stays. It returns an error rather than failing a test, so that a fault
// injector may call it from any goroutine.
func (c *Container) Kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	if _, err := run(ctx, nil, c.bin, "kill", c.id); err != nil {
		return fmt.Errorf("enginetest: killing container %s: %w", c.id, err)
	}
	for {
		out, err := run(ctx, nil, c.bin, "inspect", "--format", "{{.State.Running}}", c.id)
		if err != nil {
			return fmt.Errorf("enginetest: container %s after kill: %w", c.id, err)
		}
		if strings.TrimSpace(out) == "false" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Start starts the stopped container again and waits until it runs
// commands.
func (c *Container) Start(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	if _, err := run(ctx, nil, c.bin, "start", c.id); err != nil {
		tb.Fatalf("enginetest: starting container %s again: %v", c.id, err)
	}
	c.waitReady(tb)
}

// Restart kills the container and starts it again.
func (c *Container) Restart(tb testing.TB) {
	tb.Helper()
	if err := c.Kill(); err != nil {
		tb.Fatal(err)
	}
	c.Start(tb)
}

// waitReady waits until `exec true` succeeds in the container.
func (c *Container) waitReady(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	for {
		_, err := run(ctx, nil, c.bin, "exec", c.id, "true")
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("enginetest: container %s does not run commands: %v", c.id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// self returns this process's owner label: "<pid>:<start time>".
func self() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + ":" + startTime(pid)
}

// startTime returns field 22 of /proc/<pid>/stat (the start time in clock
// ticks since boot), or "" when it cannot be read.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// sweep removes, best effort, the harness's containers whose owner (by
// pid and start time) is no longer running.
func sweep(ctx context.Context, bin string) {
	out, err := run(ctx, nil, bin, "ps", "-a", "--filter", "label="+ownerLabel, "--format", `{{.ID}} {{.Label "`+ownerLabel+`"}}`)
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, owner, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		pidText, start, _ := strings.Cut(owner, ":")
		pid, err := strconv.Atoi(pidText)
		if err != nil || start == "" || startTime(pid) == start {
			continue
		}
		run(ctx, nil, bin, "rm", "-f", id)
	}
}
