package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
)

func TestProgressLines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reports []sandbox.Progress
		want    []string
	}{
		{"a line at the start and at each tenth passed", []sandbox.Progress{
			{Asset: "a", TotalFiles: 4, TotalBytes: 100},
			{Asset: "a", Files: 1, Bytes: 5, TotalFiles: 4, TotalBytes: 100},   // 5%: same tenth as 0%
			{Asset: "a", Files: 1, Bytes: 10, TotalFiles: 4, TotalBytes: 100},  // 10%
			{Asset: "a", Files: 2, Bytes: 19, TotalFiles: 4, TotalBytes: 100},  // still the tenth of 10%
			{Asset: "a", Files: 3, Bytes: 55, TotalFiles: 4, TotalBytes: 100},  // 55%: 20–40% skipped, one line
			{Asset: "a", Files: 4, Bytes: 100, TotalFiles: 4, TotalBytes: 100}, // done
		}, []string{
			"progress a 0% (0/4 files, 0/100 bytes)",
			"progress a 10% (1/4 files, 10/100 bytes)",
			"progress a 55% (3/4 files, 55/100 bytes)",
			"progress a 100% (4/4 files, 100/100 bytes)",
		}},
		{"a raised estimate never goes back", []sandbox.Progress{
			{Asset: "a", Files: 1, Bytes: 50, TotalFiles: 2, TotalBytes: 100},
			{Asset: "a", Files: 1, Bytes: 60, TotalFiles: 2, TotalBytes: 200}, // 30%: lower than 50%
			{Asset: "a", Files: 2, Bytes: 200, TotalFiles: 2, TotalBytes: 200},
		}, []string{
			"progress a 50% (1/2 files, 50/100 bytes)",
			"progress a 100% (2/2 files, 200/200 bytes)",
		}},
		{"a new asset starts its own lines", []sandbox.Progress{
			{Asset: "a", Files: 1, Bytes: 10, TotalFiles: 1, TotalBytes: 10},
			{Asset: "b", TotalFiles: 2, TotalBytes: 10},
			{Asset: "b", Files: 2, Bytes: 10, TotalFiles: 2, TotalBytes: 10},
		}, []string{
			"progress a 100% (1/1 files, 10/10 bytes)",
			"progress b 0% (0/2 files, 0/10 bytes)",
			"progress b 100% (2/2 files, 10/10 bytes)",
		}},
		{"empty files count by files", []sandbox.Progress{
			{Asset: "e", TotalFiles: 3},
			{Asset: "e", Files: 2, TotalFiles: 3},
			{Asset: "e", Files: 3, TotalFiles: 3},
		}, []string{
			"progress e 0% (0/3 files, 0/0 bytes)",
			"progress e 66% (2/3 files, 0/0 bytes)",
			"progress e 100% (3/3 files, 0/0 bytes)",
		}},
		{"nothing to count is done", []sandbox.Progress{{Asset: "none"}}, []string{
			"progress none 100% (0/0 files, 0/0 bytes)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p, err := newProgress(progressLines, false, &out, &out)
			require.NoError(t, err)
			require.Len(t, p.options(), 1)
			for _, r := range tc.reports {
				p.update(r)
			}
			require.NoError(t, p.finish())
			assert.Equal(t, strings.Join(tc.want, "\n")+"\n", out.String())
		})
	}
}

// failingWriter fails every write.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("disk full")
}

func TestProgressLinesWriteErrorIsReported(t *testing.T) {
	w := &failingWriter{}
	p, err := newProgress(progressLines, false, &bytes.Buffer{}, w)
	require.NoError(t, err)
	p.update(sandbox.Progress{Asset: "a", TotalBytes: 10})
	p.update(sandbox.Progress{Asset: "a", Bytes: 10, TotalBytes: 10})
	assert.EqualError(t, p.finish(), "disk full")
	assert.Equal(t, 1, w.writes, "no line is written after the first failure")
}

func TestProgressModes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	for _, tc := range []struct {
		mode    string
		asJSON  bool
		options int
	}{
		{progressAuto, false, 1}, // not a terminal: lines
		{progressAuto, true, 0},  // -json: off
		{progressLines, true, 1}, // asked for: shown with -json too
		{progressBar, false, 1},
		{progressOff, false, 0},
	} {
		p, err := newProgress(tc.mode, tc.asJSON, &stdout, &stderr)
		require.NoError(t, err, tc.mode)
		assert.Len(t, p.options(), tc.options, "mode %s, json %t", tc.mode, tc.asJSON)
		require.NoError(t, p.finish())
	}
	_, err := newProgress("fancy", false, &stdout, &stderr)
	assert.EqualError(t, err, `-progress "fancy": want auto, bar, lines or off`)

	// Neither a buffer nor a regular file is a terminal.
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	assert.False(t, isTerminal(f))
	assert.False(t, isTerminal(&stdout))
}

// writeTree writes n files of size bytes each under a new directory.
func writeTree(t *testing.T, n, size int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "data")
	for i := range n {
		p := filepath.Join(src, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%03d", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte{byte('a' + i%26)}, size), 0o644))
	}
	return src
}

var lineRE = regexp.MustCompile(`^progress data (\d+)% \((\d+)/40 files, (\d+)/40960 bytes\)$`)

// TestRunShowsProgressLines stages 40 files through the command with stderr
// not a terminal: the default shows plain lines there, each further along
// than the one before and the last one complete, while stdout keeps exactly
// the report.
func TestRunShowsProgressLines(t *testing.T) {
	src := writeTree(t, 40, 1024)
	var out, errOut bytes.Buffer
	args := []string{"-src", src, "-to", filepath.Join(t.TempDir(), "rt"), "-state", t.TempDir()}
	require.NoError(t, run(context.Background(), args, &out, &errOut, nil))

	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2, errOut.String())
	step := -1 // the tenth of the line before
	for _, l := range lines {
		m := lineRE.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		pct, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		assert.Greater(t, pct/10, step, "each line passes another tenth: %q", l)
		step = pct / 10
	}
	assert.Equal(t, "progress data 100% (40/40 files, 40960/40960 bytes)", lines[len(lines)-1])
	assert.Equal(t, 6, strings.Count(out.String(), "\n"), "stdout holds the report only: %s", out.String())
	assert.True(t, strings.HasPrefix(out.String(), "staged  "), out.String())

	// -progress off and -json (auto) leave stderr empty.
	for _, extra := range [][]string{{"-progress", "off"}, {"-json"}} {
		errOut.Reset()
		out.Reset()
		require.NoError(t, run(context.Background(), append(append([]string{}, args...), extra...), &out, &errOut, nil))
		assert.Empty(t, errOut.String(), "%v", extra)
	}
}

// TestRunProgressBar forces the bar onto a buffer: it draws the asset and
// ends cleared (the last thing written returns to the line's start), and
// stdout is the same report.
func TestRunProgressBar(t *testing.T) {
	src := writeTree(t, 20, 512)
	var out, errOut bytes.Buffer
	args := []string{"-src", src, "-to", filepath.Join(t.TempDir(), "rt"), "-state", t.TempDir(), "-progress", "bar"}
	require.NoError(t, run(context.Background(), args, &out, &errOut, nil))
	assert.Contains(t, errOut.String(), "data ")
	assert.Contains(t, errOut.String(), "files")
	assert.True(t, strings.HasSuffix(errOut.String(), "\r"), "the bar is cleared: %q", errOut.String())
	assert.Equal(t, 6, strings.Count(out.String(), "\n"), out.String())
}
