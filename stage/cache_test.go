package stage_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// stager counts calls and returns a fresh Runtime each time.
type stager struct{ calls atomic.Int64 }

func (s *stager) stage(context.Context) (*stage.Runtime, error) {
	n := s.calls.Add(1)
	return &stage.Runtime{Root: "/rt", Assets: []stage.StagedAsset{{Name: "n", Digest: string(rune('a' + n))}}}, nil
}

func acquire(t *testing.T, c *stage.Cache, key, fp string, s *stager) *stage.Lease {
	t.Helper()
	l, err := c.Acquire(context.Background(), key, fp, s.stage)
	require.NoError(t, err)
	return l
}

func TestCache(t *testing.T) {
	const idle = time.Minute
	type step struct {
		advance time.Duration
		key, fp string
		turnErr error
		reused  bool
	}
	failed := errors.New("turn failed")
	cases := []struct {
		name  string
		steps []step
	}{
		{"CompatibleResumeReuses", []step{{0, "k", "f", nil, false}, {time.Second, "k", "f", nil, true}, {0, "k", "f", nil, true}}},
		{"IncompatibleResumeRestages", []step{{0, "k", "f1", nil, false}, {0, "k", "f2", nil, false}, {0, "k", "f1", nil, false}}},
		{"FailedTurnDiscards", []step{{0, "k", "f", failed, false}, {0, "k", "f", nil, false}, {0, "k", "f", nil, true}}},
		{"IdleExpiry", []step{{0, "k", "f", nil, false}, {idle, "k", "f", nil, true}, {idle + time.Nanosecond, "k", "f", nil, false}}},
		{"KeysAreSeparate", []step{{0, "a", "f", nil, false}, {0, "b", "f", nil, false}, {0, "a", "f", nil, true}, {0, "b", "f", nil, true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{now: time.Unix(1e9, 0)}
			cache := stage.NewCache(idle, stage.WithClock(clk.Now))
			s := &stager{}
			runtimes := map[string]*stage.Runtime{}
			for i, st := range c.steps {
				clk.Advance(st.advance)
				l := acquire(t, cache, st.key, st.fp, s)
				assert.Equal(t, st.reused, l.Reused(), "step %d", i)
				if st.reused {
					assert.Same(t, runtimes[st.key], l.Runtime(), "step %d: the cached Runtime itself", i)
				}
				runtimes[st.key] = l.Runtime()
				l.Release(st.turnErr)
			}
		})
	}
}

func TestCacheInvalidate(t *testing.T) {
	cache := stage.NewCache(0)
	s := &stager{}
	acquire(t, cache, "k", "f", s).Release(nil)
	assert.Equal(t, 1, cache.Len())
	cache.Invalidate("k")
	assert.Equal(t, 0, cache.Len())
	l := acquire(t, cache, "k", "f", s)
	assert.False(t, l.Reused())
	l.Release(nil)
	l.Release(errors.New("a second Release is ignored"))
	assert.True(t, acquire(t, cache, "k", "f", s).Reused())
	assert.Equal(t, int64(2), s.calls.Load())
}

func TestCacheStageErrorNotCached(t *testing.T) {
	cache := stage.NewCache(time.Minute)
	boom := errors.New("stage failed")
	_, err := cache.Acquire(context.Background(), "k", "f", func(context.Context) (*stage.Runtime, error) { return nil, boom })
	assert.ErrorIs(t, err, boom)
	s := &stager{}
	l := acquire(t, cache, "k", "f", s) // the key is not left locked
	assert.False(t, l.Reused())
	l.Release(nil)
}

// TestCacheStagePanicUnlocks checks that a stage func that panics does not
// leave its key locked for every later turn.
func TestCacheStagePanicUnlocks(t *testing.T) {
	cache := stage.NewCache(time.Minute)
	assert.PanicsWithValue(t, "stage blew up", func() {
		_, _ = cache.Acquire(context.Background(), "k", "f", func(context.Context) (*stage.Runtime, error) { panic("stage blew up") })
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := &stager{}
	l, err := cache.Acquire(ctx, "k", "f", s.stage)
	require.NoError(t, err, "the key must not stay locked after a panicking stage")
	assert.False(t, l.Reused(), "nothing is cached from a panicking stage")
	l.Release(nil)
}

func TestCacheSerializesOneKey(t *testing.T) {
	cache := stage.NewCache(time.Minute)
	s := &stager{}
	first := acquire(t, cache, "k", "f", s)

	got := make(chan *stage.Lease)
	go func() {
		l, err := cache.Acquire(context.Background(), "k", "f", s.stage)
		assert.NoError(t, err)
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("a second turn on the key ran while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	other := acquire(t, cache, "other", "f", s) // another key does not wait
	other.Release(nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := cache.Acquire(ctx, "k", "f", s.stage)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "waiting honours ctx")

	first.Release(nil)
	second := <-got
	assert.True(t, second.Reused())
	second.Release(nil)
}

func TestCacheLongTurnDoesNotExpire(t *testing.T) {
	clk := &clock{now: time.Unix(1e9, 0)}
	cache := stage.NewCache(time.Minute, stage.WithClock(clk.Now))
	s := &stager{}
	long := acquire(t, cache, "k", "f", s)
	clk.Advance(time.Hour)
	acquire(t, cache, "other", "f", s).Release(nil) // prunes expired entries
	long.Release(nil)
	assert.True(t, acquire(t, cache, "k", "f", s).Reused(), "idle time counts from the end of the turn")
}

// TestCacheResumeDoesNotTouchSandbox stages through a Bridge: a compatible
// resume must not run a single sandbox command.
func TestCacheResumeDoesNotTouchSandbox(t *testing.T) {
	dir := t.TempDir()
	src := t.TempDir()
	build(t, src, "f=x")
	runs := new(atomic.Int64)
	b := stage.NewBridge(countingRunner{Runner: sandbox.Local(dir), n: runs})
	do := func(ctx context.Context) (*stage.Runtime, error) {
		return stage.Stage(ctx, b, filepath.Join(dir, "rt"), []stage.Asset{{Name: "a", Source: src}})
	}
	cache := stage.NewCache(time.Minute)
	l, err := cache.Acquire(context.Background(), "session", "bundle-1", do)
	require.NoError(t, err)
	l.Release(nil)
	before := runs.Load()
	require.Positive(t, before)
	l, err = cache.Acquire(context.Background(), "session", "bundle-1", do)
	require.NoError(t, err)
	assert.True(t, l.Reused())
	assert.Equal(t, before, runs.Load(), "a compatible resume touches nothing")
	p, ok := l.Runtime().Path("a")
	assert.True(t, ok)
	assert.Equal(t, filepath.Join(dir, "rt", "a"), p)
	l.Release(nil)
}
