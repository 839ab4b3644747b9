package stage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// isCarry recognizes the carry command of a plan too long for the send
// command's script.
func isCarry(c sandbox.Command) bool { return c.Script == "exec /bin/sh -s" }

// TestDeltaCarryOutOfLine: a carry too long to travel in the send
// command's script travels on its stdin, before the stream, where the
// sandbox's tar stops at its archive's end (one command), and otherwise
// (here: a Bridge made to publish by a command of its own, the path of a
// sandbox whose tar reads to the end) runs as a command of its own while
// the send command waits. The result is the same: only the changed file
// and a tampered one travel.
func TestDeltaCarryOutOfLine(t *testing.T) {
	stage.SetMaxEmbeddedCarry(t, 1)
	for _, c := range []struct {
		name    string
		opts    []stage.BridgeOption
		fresh   bool // the delta through a new Bridge, which learns the sandbox's tools in its send command
		carries int
	}{
		{"PlanOnStdin", nil, false, 0},
		{"PlanOnStdinLearning", nil, true, 0},
		{"CarryCommand", []stage.BridgeOption{stage.TwoSessions()}, false, 1},
		{"CarryCommandLearning", []stage.BridgeOption{stage.TwoSessions()}, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "a=alpha", "d/b=bravo", "d/c=charlie", "e=echo")
			r := &scriptedRunner{next: sandbox.Local(dir), match: func(sandbox.Command) bool { return false }}
			b := stage.NewBridge(r, c.opts...)
			rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			require.Equal(t, 4, rt.Assets[0].Sent)

			require.NoError(t, os.WriteFile(filepath.Join(root, "x", "d", "c"), []byte("CHARLIE"), 0o644)) // tampered in the sandbox
			build(t, src, "a=ALPHA")
			if c.fresh {
				// It reads the manifests as files, so its probe runs no
				// command and its send command learns the tools.
				r = &scriptedRunner{next: sandbox.Local(dir), match: func(sandbox.Command) bool { return false }}
				b = stage.NewBridge(readingRunner{r}, c.opts...)
			}
			rt, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}}, stage.WithVerify())
			require.NoError(t, err)
			assert.Equal(t, 2, rt.Assets[0].Sent, "the changed file and the tampered one")
			assert.Equal(t, "charlie", readFile(t, filepath.Join(root, "x", "d", "c")))
			assert.Equal(t, "ALPHA", readFile(t, filepath.Join(root, "x", "a")))
			carries, learnt := 0, 0
			for _, c := range r.commands() {
				if isCarry(c) {
					carries++
				}
				if strings.Contains(c.Script, "__tr=0") {
					learnt++
				}
			}
			assert.Equal(t, c.carries, carries, "carry commands of their own")
			if c.fresh {
				assert.Equal(t, 1, learnt, "the send command learnt the tools")
			}
			assertNoTemp(t, root)
		})
	}
}

// readingRunner is a scriptedRunner over the host's file system that
// reads files too (sandbox.FileReader).
type readingRunner struct{ *scriptedRunner }

func (readingRunner) ReadFile(_ context.Context, p string, max int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file: %w", p, fs.ErrNotExist)
	case fi.Size() > max:
		return nil, fmt.Errorf("%s holds %d bytes: %w", p, fi.Size(), sandbox.ErrLimit)
	}
	return os.ReadFile(p)
}

// TestDeltaCarryHashTools: the sandbox checks carried copies with openssl
// or sha256sum, whichever it has; with neither, or without awk, nothing is
// carried and every file travels; without the link tools (cp, find, stat,
// xargs) files are copied and hashed, never linked. Whichever tool, a
// carried file gets the manifest's mode back even when the sandbox changed
// its copy's.
func TestDeltaCarryHashTools(t *testing.T) {
	base := []string{"tar", "mkdir", "mv", "rm", "cat", "chmod", "grep", "tr", "ls"} // ls: the publish's guard identifies directories by inode without stat
	link := []string{"awk", "cp", "find", "stat", "xargs"}
	for _, c := range []struct {
		name  string
		tools []string
		sent  int
	}{
		{"openssl", append([]string{"openssl"}, link...), 1},
		{"sha256sum", append([]string{"sha256sum"}, link...), 1},
		{"sha256sum, awk alone", []string{"sha256sum", "awk"}, 1},
		{"no awk", []string{"sha256sum", "cp", "find", "stat", "xargs"}, 3},
		{"neither", link, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			for _, tool := range append(append([]string(nil), base...), c.tools...) {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Skipf("%s is not installed: %v", tool, err)
				}
				require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
			}
			t.Setenv("PATH", bin)
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "a=alpha", "b=bravo", "c=charlie")
			require.NoError(t, os.Chmod(filepath.Join(src, "b"), 0o750))
			b := stage.NewBridge(sandbox.Local(dir))
			_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			require.NoError(t, os.Chmod(filepath.Join(root, "x", "b"), 0o600))

			build(t, src, "a=ALPHA")
			rt, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)
			assert.Equal(t, c.sent, rt.Assets[0].Sent)
			fi, err := os.Stat(filepath.Join(root, "x", "b"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm(), "the manifest's mode")
			assert.Equal(t, "ALPHA", readFile(t, filepath.Join(root, "x", "a")))
			assert.Equal(t, "bravo", readFile(t, filepath.Join(root, "x", "b")))
		})
	}
}

// TestSendReportHostile: what the send command prints is parsed as it
// streams and bounded: a sandbox that floods it, sends an endless line or
// more hash lines than files fails the publish with ErrProtocol, and the
// previous copy stays.
func TestSendReportHostile(t *testing.T) {
	for _, c := range []struct {
		name, want string
		out        func(w io.Writer) error
	}{
		{"FloodBeforeReady", "unexpected output before the temporary directory was made", func(w io.Writer) error {
			line := []byte(strings.Repeat("y", 1000) + "\n")
			for range 16 << 10 { // 16 MB
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
			return nil
		}},
		{"EndlessLine", "a report line of more than", func(w io.Writer) error {
			chunk := []byte(strings.Repeat("z", 64<<10))
			if _, err := io.WriteString(w, "airlock-ready\n"); err != nil {
				return err
			}
			for range 256 { // 16 MiB
				if _, err := w.Write(chunk); err != nil {
					return err
				}
			}
			return nil
		}},
		{"TooManyHashLines", "more hash lines than files carried", func(w io.Writer) error {
			if _, err := io.WriteString(w, "airlock-ready\n"); err != nil {
				return err
			}
			line := strings.Repeat("0", 64) + "  a\n"
			for range 100 << 10 {
				if _, err := io.WriteString(w, line); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, src := t.TempDir(), t.TempDir()
			root := filepath.Join(dir, "rt")
			build(t, src, "a=alpha", "b=bravo")
			local := sandbox.Local(dir)
			_, err := stage.Stage(t.Context(), stage.NewBridge(local), root, []stage.Asset{{Name: "x", Source: src}})
			require.NoError(t, err)

			build(t, src, "a=ALPHA")
			r := &scriptedRunner{next: local, match: isTransfer, do: func(ctx context.Context, cmd sandbox.Command) error {
				if err := c.out(cmd.Stdout); err != nil {
					return err
				}
				return &sandbox.ExitError{Status: 1}
			}}
			_, err = stage.Stage(t.Context(), stage.NewBridge(r), root, []stage.Asset{{Name: "x", Source: src}})
			require.ErrorIs(t, err, sandbox.ErrProtocol)
			assert.False(t, errors.Is(err, sandbox.ErrTransport), "a hostile report is no transport failure: %v", err)
			assert.ErrorContains(t, err, c.want)
			assert.Equal(t, "alpha", readFile(t, filepath.Join(root, "x", "a")), "the previous copy stays")
		})
	}
}
