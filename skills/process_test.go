package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMaterializeHelperProcess is not a test: TestMaterializeConcurrentProcesses
// runs the test binary again with AIRLOCK_SKILLS_HELPER set, and this
// materializes the selection it names and prints the bundle as JSON.
func TestMaterializeHelperProcess(t *testing.T) {
	spec := os.Getenv("AIRLOCK_SKILLS_HELPER")
	if spec == "" {
		return
	}
	var in struct {
		State   string
		Sources []Source
	}
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b, err := Materialize(context.Background(), in.State, in.Sources)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := json.Marshal(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("BUNDLE %s\n", out)
	os.Exit(0)
}

// TestMaterializeConcurrentProcesses materializes one selection from four
// processes at once: one bundle, identical results, no temporary directory.
func TestMaterializeConcurrentProcesses(t *testing.T) {
	src, state := t.TempDir(), t.TempDir()
	var sel []Source
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		sel = append(sel, Source{Key: name, Name: name, Dir: skillDir(t, src, name, "big.bin:"+strings.Repeat("y", 300_000))})
	}
	spec, err := json.Marshal(struct {
		State   string
		Sources []Source
	}{state, sel})
	require.NoError(t, err)

	const n = 4
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMaterializeHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "AIRLOCK_SKILLS_HELPER="+string(spec))
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	var bundles []string
	for i := range n {
		require.NoError(t, errs[i], outs[i])
		_, line, ok := strings.Cut(outs[i], "BUNDLE ")
		require.True(t, ok, outs[i])
		bundles = append(bundles, strings.SplitN(line, "\n", 2)[0])
	}
	for _, b := range bundles[1:] {
		assert.JSONEq(t, bundles[0], b, "every process reports the same bundle")
	}
	var b Bundle
	require.NoError(t, json.Unmarshal([]byte(bundles[0]), &b))
	for _, s := range sel {
		data, err := os.ReadFile(filepath.Join(b.Dir, s.Name, "big.bin"))
		require.NoError(t, err)
		assert.Len(t, data, 300_000, "no torn copy")
	}
	tmps, err := filepath.Glob(filepath.Join(state, ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, tmps)
	bundleDirs, err := filepath.Glob(filepath.Join(state, "[0-9a-f]*"))
	require.NoError(t, err)
	assert.Equal(t, []string{b.Dir}, bundleDirs, "one bundle")
}
