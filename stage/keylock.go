package stage

import (
	"context"
	"sync"
)

// keyLock is a set of mutexes by key; waiting for one honours a context.
// The zero value is ready to use.
type keyLock struct {
	mu sync.Mutex
	m  map[string]*keySlot
}

type keySlot struct {
	ch   chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters
}

// lock waits for key, or for ctx to end. The returned function unlocks; it
// must be called exactly once.
func (l *keyLock) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*keySlot)
	}
	s := l.m[key]
	if s == nil {
		s = &keySlot{ch: make(chan struct{}, 1)}
		l.m[key] = s
	}
	s.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-s.ch
			release()
		})
	}, nil
}
