package sentinel_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockdev/airlock/internal/sentinel"
)

func TestSentinel(t *testing.T) {
	tmp, perm := sentinel.Temporary("lock held"), sentinel.Permanent("file changed")
	assert.Equal(t, "lock held", tmp.Error())
	assert.Equal(t, "file changed", perm.Error())
	assert.NotSame(t, sentinel.Temporary("lock held"), tmp, "each call makes its own sentinel")
	assert.NotErrorIs(t, tmp, sentinel.Temporary("lock held"), "errors.Is compares identity, not the message")

	var r interface{ Retryable() bool }
	wrapped := fmt.Errorf("restore: %w", tmp)
	assert.ErrorIs(t, wrapped, tmp)
	if assert.ErrorAs(t, wrapped, &r) {
		assert.True(t, r.Retryable())
	}
	// The first answer in the chain wins: perm, named first, decides.
	both := fmt.Errorf("%w: %w", perm, tmp)
	if assert.ErrorAs(t, both, &r) {
		assert.False(t, r.Retryable())
	}
	assert.True(t, errors.Is(both, tmp) && errors.Is(both, perm))
}
