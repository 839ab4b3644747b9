package keylock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entries reports how many keys m keeps.
func (m *Map) entries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// refs reports the holders and waiters of key.
func (m *Map) refs(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.m[key]; s != nil {
		return s.refs
	}
	return 0
}

// waitRefs waits until key has n holders and waiters.
func waitRefs(t *testing.T, m *Map, key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return m.refs(key) == n }, 5*time.Second, time.Millisecond)
}

func TestMutualExclusion(t *testing.T) {
	var m Map
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for range 16 {
		wg.Go(func() {
			for range 50 {
				unlock, err := m.Lock(t.Context(), "k")
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for {
					old := most.Load()
					if n <= old || most.CompareAndSwap(old, n) {
						break
					}
				}
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "one holder at a time")
	assert.Zero(t, m.entries(), "no entry outlives its use")
}

func TestKeysAreIndependent(t *testing.T) {
	var m Map
	unlockA, err := m.Lock(t.Context(), "a")
	require.NoError(t, err)
	defer unlockA()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	unlockB, err := m.Lock(ctx, "b")
	require.NoError(t, err, "holding a does not block b")
	unlockB()
	assert.Equal(t, 1, m.entries())
}

func TestCancelWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", context.WithCancel, context.Canceled},
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 20*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Map
			unlock, err := m.Lock(t.Context(), "k")
			require.NoError(t, err)

			ctx, cancel := tc.ctx(t.Context())
			defer cancel()
			type result struct {
				unlock func()
				err    error
			}
			done := make(chan result, 1)
			go func() {
				u, err := m.Lock(ctx, "k")
				done <- result{u, err}
			}()
			waitRefs(t, &m, "k", 2) // the waiter is in
			if tc.want == context.Canceled {
				cancel()
			} // else the deadline ends the wait
			r := <-done
			require.ErrorIs(t, r.err, tc.want)
			assert.Nil(t, r.unlock, "a cancelled waiter holds nothing")
			assert.Equal(t, 1, m.refs("k"), "the waiter's reference is dropped")

			// The first holder still holds k: a fresh waiter must wait.
			short, cancelShort := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer cancelShort()
			_, err = m.Lock(short, "k")
			require.ErrorIs(t, err, context.DeadlineExceeded)

			unlock()
			assert.Zero(t, m.entries(), "no entry left")
			unlock2, err := m.Lock(t.Context(), "k")
			require.NoError(t, err, "the key is free again")
			unlock2()
		})
	}
}

func TestEndedContextFailsOnFreeKey(t *testing.T) {
	var m Map
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	unlock, err := m.Lock(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, unlock)
	assert.Zero(t, m.entries())
}

func TestUnlockTwiceIsHarmless(t *testing.T) {
	var m Map
	unlock, err := m.Lock(t.Context(), "k")
	require.NoError(t, err)
	unlock()
	unlock()
	assert.Zero(t, m.entries())

	// A second unlock must not release someone else's hold.
	other, err := m.Lock(t.Context(), "k")
	require.NoError(t, err)
	defer other()
	unlock()
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = m.Lock(short, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded, "k is still held by other")
}

func TestNoLeakedEntries(t *testing.T) {
	var m Map
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("k%d", (g+i)%13)
				ctx, cancel := context.WithCancel(t.Context())
				if i%3 == 0 {
					cancel() // some waiters give up at once
				}
				unlock, err := m.Lock(ctx, key)
				if err == nil {
					unlock()
				} else {
					assert.ErrorIs(t, err, context.Canceled)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	assert.Zero(t, m.entries())
}
