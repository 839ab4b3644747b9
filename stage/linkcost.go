package stage

import (
	"sync"
	"time"
)

// linkCosts is what a Bridge has learnt of its sandbox from its own
// publishes, so that a delta never costs more than a full stage: carrying
// the unchanged files (linking or copying the previous copy's, in the
// sandbox, and the plan and checks around it) has a cost per file that
// does not depend on the link, and sending them has one per byte of tar
// stream that does. On a fast link (a local or same-host sandbox) sending
// a tree of many small files can be cheaper than carrying it; on a slow
// one, carrying almost always wins.
// Until both costs are known (a publish without a carry and one with a
// carry, each large enough to time) the Bridge carries, as it always did.
type linkCosts struct {
	mu      sync.Mutex
	perByte float64 // seconds of a publish per byte of tar stream; 0: not yet known
	perFile float64 // seconds of a publish per file carried, beyond its stream; 0: not yet known
	// perCompare: seconds per file of the comparing walk that finds the
	// unchanged files, where Stage left it to the Bridge; 0: not yet known.
	perCompare float64
	// declined counts the carries the estimates gave up since the last
	// one made; remeasure lets the next carry through (see retry).
	declined  int
	remeasure bool
}

const (
	// learnBytes and learnFiles: the smallest stream and carry timed
	// (smaller ones measure the round trip, not the rate).
	learnBytes = 8 << 20
	learnFiles = 1000
	// carryMargin: the carry is given up only when it is estimated to cost
	// more than this many times sending the files (estimates are rough,
	// and a wrong give-up on a slow link costs far more than a wrong carry
	// on a fast one).
	carryMargin = 1.2
	// retryEvery: every retryEvery-th carry the estimates give up is made
	// anyway (retry).
	retryEvery = 4
)

// retry (c.mu held) counts a carry the estimates gave up and reports
// whether it is made anyway, to be timed again: every retryEvery-th one.
// The cost of a carry is learnt only from carries made, so one slow
// carry (an outside tester's: the first after the sandbox's container
// restarted) would otherwise have a Bridge send whole trees for good.
func (c *linkCosts) retry() bool {
	c.declined++
	if c.declined < retryEvery {
		return false
	}
	c.declined = 0
	return true
}

// learn times a publish that took d, streamed n tar bytes and carried
// planned files: one that carried nothing teaches the cost of a byte sent
// (the whole publish's, per byte), one that carried teaches the cost of a
// file carried (what the publish took beyond its stream, per file).
func (c *linkCosts) learn(n int64, planned int, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case planned == 0 && n >= learnBytes:
		c.perByte = ewma(c.perByte, d.Seconds()/float64(n))
	case planned >= learnFiles && c.perByte > 0:
		c.perFile = ewma(c.perFile, max(d.Seconds()-float64(n)*c.perByte, 0)/float64(planned))
	}
}

// ewma weighs the last observation as much as all before it.
func ewma(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return (old + x) / 2
}

// carryPays reports whether carrying the unchanged files u is estimated
// to cost less than carryMargin times sending them (tarBytes), or the
// costs are not known yet; every retryEvery-th carry it gives up is made
// anyway (retry), as is the one after a comparison retry let through.
func (c *linkCosts) carryPays(u []UnchangedFile) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perByte == 0 || c.perFile == 0 {
		return true
	}
	if c.remeasure { // comparePays let this one through (retry)
		c.remeasure = false
		return true
	}
	var n int64
	for _, f := range u {
		n += tarBytes(f.Size)
	}
	if c.perFile*float64(len(u)) <= carryMargin*c.perByte*float64(n) {
		c.declined = 0
		return true
	}
	return c.retry()
}

// comparePays reports whether comparing a Source with a previous copy of
// files regular files (n tar bytes in all) and carrying them might cost
// less than sending them, or the costs are not known yet. It is asked
// before the comparison, which it counts, with no margin: it is the
// guard that keeps a delta from costing more than a full stage, and
// whichever side it picks when the two are close costs about the same.
func (c *linkCosts) comparePays(files int, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perByte == 0 || c.perFile == 0 {
		return true
	}
	if (c.perFile+c.perCompare)*float64(files) <= c.perByte*float64(n) {
		return true
	}
	if c.retry() {
		c.remeasure = true // and the carry after this comparison is made too
		return true
	}
	return false
}

// learnCompare times a comparing walk over files files that took d.
func (c *linkCosts) learnCompare(files int, d time.Duration) {
	if files < learnFiles {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.perCompare = ewma(c.perCompare, d.Seconds()/float64(files))
}

// tarBytes is what a regular file of size bytes takes in a tar stream:
// its header block and its content in whole blocks.
func tarBytes(size int64) int64 { return 512 + (size+511)/512*512 }
