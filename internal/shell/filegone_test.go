package shell_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
)

// TestFileScriptFileGone: a file that goes after the command found it (the
// agent's race: its directory swapped away and removed) is reported as
// changed, or ends with the "gone" trailer once cat failed on it, never as
// a sandbox without stat or a failed command (which the host takes for
// its own failure); a cat that fails on a file still there exits 1; a
// FIFO swapped in after the file's stat is not opened (cat would wait for
// a writer), and the trailer shows it. stat and cat are wrappers that
// first remove or replace the file (or not).
func TestFileScriptFileGone(t *testing.T) {
	realStat, err := exec.LookPath("stat")
	require.NoError(t, err)
	realCat, err := exec.LookPath("cat")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, stat, cat string // the wrappers' scripts before they run the real tool
		status          int
		header, trailer string
	}{
		{"gone before its stat", `[ "$3" = ./f ] && rm -f "$W/d/f"`, ``, 0, shell.FileHeader + " changed 2", ""},
		{"gone during cat", `:`, `rm -f "$W/d/f"; exit 1`, 0, shell.FileHeader + " file", shell.FileTrailer + " gone"},
		{"cat fails, the file stays", `:`, `exit 1`, 1, shell.FileHeader + " file", ""},
		{"a FIFO after its stat", `[ "$3" = ./f ] && [ -f "$W/d/f" ] && { "$REAL" "$@"; rm -f "$W/d/f"; mkfifo "$W/d/f"; exit; }`, `exit 9`, 0, shell.FileHeader + " file", shell.FileTrailer + " 1 0 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(w, "d"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(w, "d", "f"), []byte("content"), 0o644))
			bin := t.TempDir()
			for name, pre := range map[string]string{"stat": tc.stat, "cat": tc.cat} {
				real := map[string]string{"stat": realStat, "cat": realCat}[name]
				if pre == "" {
					pre = ":"
				}
				script := "#!/bin/sh\n" + pre + "\nexec " + shell.Quote(real) + " \"$@\"\n"
				require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755))
			}
			cmd := exec.Command("sh", "-c", shell.FileScript(w, []string{"d", "f"}, false))
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "W="+w, "REAL="+realStat)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			status := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				status = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.status, status, "stderr: %q", stderr.String())
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			require.NotEmpty(t, lines)
			assert.True(t, strings.HasPrefix(lines[0], tc.header), "first report %q", lines[0])
			r, err := shell.ParseFileReport(lines[0], 2)
			require.NoError(t, err)
			if tc.trailer == "" {
				assert.Len(t, lines, 1, "%q", lines)
				return
			}
			require.Len(t, lines, 2, "%q", lines)
			assert.True(t, strings.HasPrefix(lines[1], tc.trailer), "trailer %q", lines[1])
			assert.Equal(t, shell.FileOK, r.Kind)
		})
	}
}
