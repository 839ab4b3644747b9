package workspace_test

import (
	"crypto/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/workspace"
)

// TestRestoreSendsOnlyNewCommits: a Restore's bundle leaves out the
// commits an earlier Restore of the round brought (fast-forwarded, or
// merged with the user's own commits), so the local repository grows by
// what is new. Before, every Restore carried all the round's commits
// again: an outside tester's repository grew by a full copy of them at
// each Restore (1 MB, 2 MB, 3 MB…).
func TestRestoreSendsOnlyNewCommits(t *testing.T) {
	e := newEnv(t, runners[0].new)
	initRepo(t, e.local, map[string]string{"a": "1\n"})
	round, err := workspace.Prepare(ctx(t), e.spec)
	require.NoError(t, err)

	big := make([]byte, 1<<20)
	_, err = rand.Read(big)
	require.NoError(t, err)
	write(t, e.remote, "big.bin", string(big))
	git(t, e.remote, "add", "big.bin")
	git(t, e.remote, "commit", "-qm", "big")
	_, err = round.Restore(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, string(big), read(t, e.local, "big.bin"))

	for i, userCommits := range []bool{false, true, false} {
		if userCommits {
			write(t, e.local, "user", strconv.Itoa(i)+"\n")
			git(t, e.local, "add", "user")
			git(t, e.local, "commit", "-qm", "user")
		}
		before := packKiB(t, e.local)
		write(t, e.remote, "small", strconv.Itoa(i)+"\n")
		git(t, e.remote, "add", "small")
		git(t, e.remote, "commit", "-qm", "small")
		_, err = round.Restore(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i)+"\n", read(t, e.local, "small"))
		grew := packKiB(t, e.local) - before
		assert.Less(t, grew, 64, "restore %d: the local packs grew by %d KiB for a one-line commit", i, grew)
	}
	assert.Empty(t, git(t, e.local, "fsck", "--strict", "--no-progress", "--no-dangling"))
}

// packKiB is what the local repository's objects take, in KiB (loose and
// packed).
func packKiB(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(git(t, dir, "count-objects", "-v"), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		if k == "size" || k == "size-pack" {
			x, err := strconv.Atoi(v)
			require.NoError(t, err)
			n += x
		}
	}
	return n
}
