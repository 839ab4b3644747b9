package stage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/airlockdev/airlock/internal/tree"
)

// maxHeld bounds what an early stream holds in memory before the carry's
// end: past it, the walk waits for that end (as it would have without the
// head start).
const maxHeld = 4 << 20

// errNotReleased is what an early stream's writer returns when the
// publish stopped before the sandbox reported the carry done.
var errNotReleased = errors.New("stage: the stream was not sent: the carry did not end")

// earlyStream is a tar stream written while the sandbox carries: the
// host's walk (a stat of every file, the changed files' bytes) runs beside
// the carry instead of after it. Whatever the walk writes is held in
// memory, up to maxHeld, until the carry's report says which planned files
// the sandbox carried (release): only then does the stream reach the send
// command's stdin, where it always followed the report. The walk streams
// every file the plan does not hold, and takes the planned files as
// carried; those the sandbox did not carry after all (a copy tampered
// with, a file gone) are read again from the host, checked against the
// hash the manifest gives them, and sent after the walk.
type earlyStream struct {
	mu       sync.Mutex
	cond     *sync.Cond
	held     bytes.Buffer
	released bool
	stopped  bool
	carried  map[string]bool // set by release
	dst      io.Writer
	before   func() error // runs once, before the first byte reaches dst
	flushed  bool
	cancel   context.CancelFunc
	done     chan error // the writer's outcome
}

func newEarlyStream(dst io.Writer, before func() error, cancel context.CancelFunc) *earlyStream {
	e := &earlyStream{dst: dst, before: before, cancel: cancel, done: make(chan error, 1)}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// Write holds p until release, or writes it through after; it fails once
// the stream is stopped.
func (e *earlyStream) Write(p []byte) (int, error) {
	e.mu.Lock()
	for !e.released && !e.stopped && e.held.Len() > 0 && e.held.Len()+len(p) > maxHeld {
		e.cond.Wait()
	}
	switch {
	case e.stopped:
		e.mu.Unlock()
		return 0, errNotReleased
	case !e.released:
		n, _ := e.held.Write(p) // bytes.Buffer.Write never fails
		e.mu.Unlock()
		return n, nil
	}
	e.mu.Unlock()
	if err := e.flush(); err != nil {
		return 0, err
	}
	return e.dst.Write(p)
}

// flush writes what is held to dst, once released; only the writer's
// goroutine calls it.
func (e *earlyStream) flush() error {
	if e.flushed {
		return nil
	}
	e.flushed = true
	if err := e.before(); err != nil {
		return err
	}
	_, err := e.dst.Write(e.held.Bytes())
	e.held = bytes.Buffer{}
	return err
}

// release lets the stream through to dst: the sandbox carried the planned
// files in carried.
func (e *earlyStream) release(carried map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.released, e.carried = true, carried
	e.cond.Broadcast()
}

// stop ends a stream that was not released (the publish failed before the
// carry's end) and waits for its writer; nothing reached dst.
func (e *earlyStream) stop() {
	e.mu.Lock()
	if !e.released {
		e.stopped = true
		e.cond.Broadcast()
	}
	e.mu.Unlock()
	e.cancel()
	<-e.done
}

// uncarried waits for the carry's end and returns, sorted, the planned
// files the sandbox did not carry.
func (e *earlyStream) uncarried(planned map[string]string) ([]string, error) {
	e.mu.Lock()
	for !e.released && !e.stopped {
		e.cond.Wait()
	}
	defer e.mu.Unlock()
	if e.stopped {
		return nil, errNotReleased
	}
	var missing []string
	for p := range planned {
		if !e.carried[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// streamsEarly reports whether the publish streams during the carry: a
// plan the sandbox can check by hash, and a Source whose planned files
// open without a link (tree.OpenFile), for those it may have to read
// again.
func (s *publishRun) streamsEarly(hash bool) bool {
	return len(s.plan.Want) > 0 && hash && s.src.opts.Links != tree.FollowLinksWithin
}

// startEarly starts the stream's writer during the carry (earlyStream).
func (s *publishRun) startEarly() {
	ctx, cancel := context.WithCancel(s.cmd.wctx)
	e := newEarlyStream(sink{s.cmd.pw}, func() error {
		if s.planned != nil {
			return <-s.planned
		}
		return nil
	}, cancel)
	s.early = e
	planned := make(map[string]bool, len(s.plan.Want))
	for p := range s.plan.Want {
		planned[p] = true
	}
	go func() {
		err := s.writeTo(ctx, e, planned, e.uncarried)
		if err == nil {
			err = e.flush() // a stream that ended before its release (never: uncarried waits for it)
		}
		cancel()
		e.done <- err
	}()
}
