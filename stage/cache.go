package stage

import (
	"context"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/keylock"
)

// DefaultCacheIdle is how long an unused Runtime stays in a Cache unless
// NewCache is told otherwise.
const DefaultCacheIdle = 30 * time.Minute

// Cache keeps the staged Runtime of each session between turns, so that a
// compatible resume (same key, same fingerprint) reuses it without touching
// the sandbox. An entry is discarded on an incompatible resume (another
// fingerprint), after a failed turn, and after it has been idle (no turn
// holding it) for longer than the idle period. Turns on one key are
// serialized: Acquire waits until the previous lease is released. A Cache is
// safe for concurrent use; it holds Runtimes only, in memory.
//
// The key names the session (for example session.Key); the fingerprint
// names what was staged for it (for example the skills bundle identity and
// the stage root). Neither is interpreted.
type Cache struct {
	idle  time.Duration
	now   func() time.Time
	locks keylock.Map
	mu    sync.Mutex
	m     map[string]*cacheEntry
}

type cacheEntry struct {
	fingerprint string
	rt          *Runtime
	last        time.Time // end of the last turn
	leased      bool
}

// CacheOption configures a Cache.
type CacheOption func(*Cache)

// WithClock makes the Cache read the time from now. Default: time.Now.
func WithClock(now func() time.Time) CacheOption {
	return func(c *Cache) {
		if now != nil {
			c.now = now
		}
	}
}

// NewCache returns an empty Cache whose entries expire after idle without
// use; idle <= 0 means DefaultCacheIdle.
func NewCache(idle time.Duration, opts ...CacheOption) *Cache {
	if idle <= 0 {
		idle = DefaultCacheIdle
	}
	c := &Cache{idle: idle, now: time.Now, m: make(map[string]*cacheEntry)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Lease is one turn's hold on a Cache key. Release it when the turn ends.
type Lease struct {
	c      *Cache
	key    string
	rt     *Runtime
	reused bool
	unlock func()
	once   sync.Once
}

// Runtime returns the Runtime for this turn.
func (l *Lease) Runtime() *Runtime { return l.rt }

// Reused reports whether the Runtime came from the cache (the sandbox was
// not touched).
func (l *Lease) Reused() bool { return l.reused }

// Release ends the turn. A non-nil turnErr (the turn failed) discards the
// cached Runtime, so the next turn stages again. Release is idempotent.
func (l *Lease) Release(turnErr error) {
	l.once.Do(func() {
		c := l.c
		c.mu.Lock()
		if e := c.m[l.key]; e != nil {
			if turnErr != nil {
				delete(c.m, l.key)
			} else {
				e.leased, e.last = false, c.now()
			}
		}
		c.mu.Unlock()
		l.unlock()
	})
}

// Acquire waits until no other lease holds key (or ctx ends). It then
// returns the cached Runtime when one exists for key with this fingerprint
// and has not expired; otherwise it discards any entry for key, calls stage,
// and caches the Runtime stage returns. A stage error is returned and
// nothing is cached.
func (c *Cache) Acquire(ctx context.Context, key, fingerprint string, stage func(context.Context) (*Runtime, error)) (*Lease, error) {
	unlock, err := c.locks.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	leased := false
	defer func() {
		if !leased {
			unlock() // also when stage panics: the key must not stay locked
		}
	}()
	c.mu.Lock()
	now := c.now()
	for k, e := range c.m {
		if !e.leased && now.Sub(e.last) > c.idle {
			delete(c.m, k)
		}
	}
	if e := c.m[key]; e != nil {
		if e.fingerprint == fingerprint {
			e.leased = true
			c.mu.Unlock()
			leased = true
			return &Lease{c: c, key: key, rt: e.rt, reused: true, unlock: unlock}, nil
		}
		delete(c.m, key)
	}
	c.mu.Unlock()
	rt, err := stage(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.m[key] = &cacheEntry{fingerprint: fingerprint, rt: rt, last: c.now(), leased: true}
	c.mu.Unlock()
	leased = true
	return &Lease{c: c, key: key, rt: rt, unlock: unlock}, nil
}

// Invalidate discards the Runtime cached for key, if any. A turn holding it
// keeps its Runtime; the next Acquire stages again.
func (c *Cache) Invalidate(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// Len returns the number of cached Runtimes, expired ones included until the
// next Acquire prunes them.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
