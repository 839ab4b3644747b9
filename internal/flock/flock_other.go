//go:build !unix

package flock

import (
	"context"
	"errors"
	"os"
)

// Supported reports whether this platform has flock(2); it has not here.
const Supported = false

// NoFollow is 0 here: there is no O_NOFOLLOW.
const NoFollow = 0

var errUnsupported = errors.New("flock(2) is not available on this platform")

// Try fails: there is no flock(2) here.
func Try(*os.File) (bool, error) { return false, errUnsupported }

// Wait fails: there is no flock(2) here.
func Wait(context.Context, *os.File) error { return errUnsupported }

const nonBlock = 0
