package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// inProgress names the local repository's files that mark a git operation
// stopped half-way, and what the user runs to end it. While one is there,
// HEAD is the operation's, not the user's branch (a rebase's or a
// bisect's detached commit), or the operation's abort resets the branch to
// where it began (a cherry-pick's or a revert's, to ORIG_HEAD or the
// sequence's start), or the abort resets the index and work tree to HEAD
// (a merge's: the agent's staged new files would go with it): a
// Restore that integrated the agent's commits there would have them left
// behind, unseen, by the user's next `git rebase --abort` or `git bisect
// reset`, or had its staged new file deleted by `git merge --abort`
// (outside testers' findings).
var inProgress = []struct{ file, what, end string }{
	{"rebase-merge", "a rebase", "git rebase --continue or git rebase --abort"},
	{"rebase-apply", "a rebase or git am", "git rebase --continue, git am --continue or their --abort"},
	{"BISECT_LOG", "a bisect", "git bisect reset"},
	{"CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue or git cherry-pick --abort"},
	{"REVERT_HEAD", "a revert", "git revert --continue or git revert --abort"},
	{"sequencer", "a cherry-pick or revert sequence", "git cherry-pick --continue or git cherry-pick --abort (git revert for a revert)"},
	{"MERGE_HEAD", "a merge", "git commit to conclude it, or git merge --abort"},
}

// checkInProgress fails with ErrRepo, before the Restore reads or writes
// anything, when a git operation stopped half-way in the local repository
// (inProgress). The paths are asked of git, so a linked worktree's own are
// checked.
func (r *Round) checkInProgress(ctx context.Context) error {
	args := []string{"rev-parse"}
	for _, p := range inProgress {
		args = append(args, "--git-path", p.file)
	}
	out, err := r.git.Output(ctx, args...)
	if err != nil {
		return fmt.Errorf("workspace: asking git where %s keeps the state of a stopped rebase, bisect, cherry-pick, revert or merge: %w", r.spec.Local, err)
	}
	paths := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(paths) != len(inProgress) {
		return fmt.Errorf("workspace: git rev-parse --git-path in %s answered %d paths for %d asked", r.spec.Local, len(paths), len(inProgress))
	}
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.spec.Local, p)
		}
		if _, err := os.Lstat(p); err == nil {
			ip := inProgress[i]
			return fmt.Errorf("%w: %s is in progress in %s (%s is there): end it first (%s), then run Restore again; nothing was changed, and the sandbox still holds the agent's work", ErrRepo, ip.what, r.spec.Local, p, ip.end)
		}
	}
	return nil
}
