package session

import (
	"fmt"
	"io/fs"

	"github.com/airlockdev/airlock/internal/statedir"
)

// stateDirOp is the Op of every state directory error of Bind.
const stateDirOp = "session.Bind state directory"

// stateDir creates the state directory p when it is missing and returns
// its real path, under the rule every state directory follows
// (internal/statedir).
func stateDir(p string) (string, error) {
	real, err := statedir.Make(p)
	if err != nil {
		return "", &fs.PathError{Op: stateDirOp, Path: p, Err: fmt.Errorf("%w: %w", ErrInvalidStateDir, err)}
	}
	return real, nil
}
