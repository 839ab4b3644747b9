package keylock

import (
	"context"
	"sync"
)

// Map is a set of mutexes by key. The zero value is ready to use; a Map must
// not be copied after first use.
type Map struct {
	mu sync.Mutex
	m  map[string]*slot
}

// slot is the mutex of one key.
type slot struct {
	ch   chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters; guarded by Map.mu
}

// Lock waits until it holds key, or until ctx ends. On success it returns
// the function that unlocks key; calling it more than once is harmless. On
// failure it returns ctx's error and holds nothing. A ctx that has already
// ended fails without waiting, even when key is free.
func (m *Map) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.m == nil {
		m.m = make(map[string]*slot)
	}
	s := m.m[key]
	if s == nil {
		s = &slot{ch: make(chan struct{}, 1)}
		m.m[key] = s
	}
	s.refs++
	m.mu.Unlock()

	select {
	case s.ch <- struct{}{}:
	case <-ctx.Done():
		m.release(key, s)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-s.ch
			m.release(key, s)
		})
	}, nil
}

// release drops one reference to s, and s itself when it was the last.
func (m *Map) release(key string, s *slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(m.m, key)
	}
}
