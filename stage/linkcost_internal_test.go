package stage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTarBytes(t *testing.T) {
	for size, want := range map[int64]int64{0: 512, 1: 1024, 512: 1024, 513: 1536, 10 << 20: 512 + 10<<20} {
		assert.Equal(t, want, tarBytes(size), "size %d", size)
	}
}

// TestCarryPays: the carry is given up only when both costs are known and
// carrying is estimated at more than carryMargin times sending.
func TestCarryPays(t *testing.T) {
	u := []UnchangedFile{{Size: 0}, {Size: 1000}} // 512 + 1536 tar bytes
	for _, c := range []struct {
		perByte, perFile float64
		pays             bool
	}{
		{0, 0, true},
		{1, 0, true},
		{0, 1, true},
		{1e-6, 1e-6 * 2048 * carryMargin / 2, true},    // exactly at the margin
		{1e-6, 1e-6 * 2048 * carryMargin / 1.9, false}, // just beyond it
		{1e-9, 1e-3, false},
		{1e-6, 1e-9, true},
	} {
		lc := linkCosts{perByte: c.perByte, perFile: c.perFile}
		assert.Equal(t, c.pays, lc.carryPays(u), "%+v", c)
	}
}

// TestComparePays: before a comparison, carrying every file of the
// previous copy must be estimated at no more than sending them, counting
// the comparison, with no margin; unknown costs compare.
func TestComparePays(t *testing.T) {
	const files, n = 2, 2048
	for _, c := range []struct {
		perByte, perFile, perCompare float64
		pays                         bool
	}{
		{0, 0, 0, true},
		{1, 0, 0, true},
		{0, 1, 1, true},
		{1e-6, 1e-6 * n / files, 0, true},         // equal
		{1e-6, 1e-6 * n / files * 1.01, 0, false}, // within carryMargin, still not
		{1e-6, 1e-6 * n / files / 2, 1e-6 * n / files / 2, true},
		{1e-6, 1e-6 * n / files / 2, 1e-6 * n / files / 1.9, false}, // the comparison tips it
		{1e-9, 1e-3, 0, false},
		{1e-6, 1e-9, 1e-9, true},
	} {
		lc := linkCosts{perByte: c.perByte, perFile: c.perFile, perCompare: c.perCompare}
		assert.Equal(t, c.pays, lc.comparePays(files, n), "%+v", c)
	}
}

// TestLearnCompare: a comparison of fewer than learnFiles files teaches
// nothing; larger ones set the cost per file, each weighing as much as
// all before it.
func TestLearnCompare(t *testing.T) {
	var lc linkCosts
	lc.learnCompare(learnFiles-1, time.Second)
	assert.Zero(t, lc.perCompare)
	lc.learnCompare(1000, time.Second)
	assert.InDelta(t, 1e-3, lc.perCompare, 1e-12)
	lc.learnCompare(1000, 3*time.Second)
	assert.InDelta(t, 2e-3, lc.perCompare, 1e-12)
}

// TestLinkCostsLearn: publishes below the thresholds teach nothing; one
// without a carry teaches the cost per byte, one with a carry (once that
// is known) the cost per file beyond its stream; each new observation
// weighs as much as all before it.
func TestLinkCostsLearn(t *testing.T) {
	var lc linkCosts
	lc.learn(learnBytes-1, 0, time.Second)
	lc.learn(1<<30, learnFiles, time.Second) // a carry before the byte's cost is known
	assert.Zero(t, lc.perByte)
	assert.Zero(t, lc.perFile)
	lc.learn(1<<30, 0, time.Second)
	assert.InDelta(t, 1.0/(1<<30), lc.perByte, 1e-18)
	lc.learn(1<<30, 0, 3*time.Second)
	assert.InDelta(t, 2.0/(1<<30), lc.perByte, 1e-18)
	lc.learn(1<<30, learnFiles-1, 9*time.Second)
	assert.Zero(t, lc.perFile, "too few files carried")
	lc.learn(1<<29, 2000, 3*time.Second) // 1 s of stream, 2 s for 2,000 files
	assert.InDelta(t, 1e-3, lc.perFile, 1e-12)
	lc.learn(0, 2000, 6*time.Second)
	assert.InDelta(t, 2e-3, lc.perFile, 1e-12)
	lc.learn(1<<30, 2000, time.Second) // faster than its stream: carrying cost nothing
	assert.InDelta(t, 1e-3, lc.perFile, 1e-12)
}

// TestLinkCostsRetry: a carry the estimates give up is made anyway every
// retryEvery-th time, so that a Bridge whose one slow carry set its cost
// too high times a carry again (an outside tester's Bridge sent whole
// trees after a cut); a comparison so let through lets its carry through
// too.
func TestLinkCostsRetry(t *testing.T) {
	u := []UnchangedFile{{Size: 1000}}
	lc := linkCosts{perByte: 1e-9, perFile: 1}
	var got []bool
	for range 2 * retryEvery {
		got = append(got, lc.carryPays(u))
	}
	want := make([]bool, 2*retryEvery)
	want[retryEvery-1], want[2*retryEvery-1] = true, true
	assert.Equal(t, want, got)

	lc = linkCosts{perByte: 1e-9, perFile: 1}
	for range retryEvery - 1 {
		assert.False(t, lc.comparePays(1, 1536))
	}
	assert.True(t, lc.comparePays(1, 1536), "the retryEvery-th comparison is made")
	assert.True(t, lc.carryPays(u), "and so is its carry")
	assert.False(t, lc.carryPays(u), "once")

	// A carry the estimate allows starts the count again.
	lc = linkCosts{perByte: 1e-9, perFile: 1}
	for range retryEvery - 1 {
		assert.False(t, lc.carryPays(u))
	}
	lc.perFile = 1e-12
	assert.True(t, lc.carryPays(u))
	lc.perFile = 1
	for range retryEvery - 1 {
		assert.False(t, lc.carryPays(u))
	}
}
