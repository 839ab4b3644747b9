// Package workspace carries a local work tree to a sandbox and back, with
// no git remote anywhere: the local execution-workspace directory is the
// only persistence boundary across runs.
//
// [Prepare] gives the sandbox (through a [sandbox.Runner]) a copy of
// Spec.Local at Spec.Remote and returns a [Round]; [Round.Restore] brings
// the agent's commits and edits back. [Reopen] recovers a round by its id
// after a host restart.
//
// # Git work trees
//
// History travels as a git bundle of one temporary ref
// (refs/airlock/tmp/<owner>/<round id>/snap, deleted on return, also on
// error or cancellation; see Leftovers below), which the sandbox indexes
// as it arrives (git index-pack) once git bundle verify has checked that
// its repository holds the commits the bundle requires. The dirty state (tracked
// edits, staged changes, untracked files that are not ignored, deletions)
// is a snapshot commit built with a temporary index (a copy of the user's
// index, GIT_INDEX_FILE): the user's index file, work tree and refs are
// not modified. The sandbox gets a repository (git init when absent), the
// same branch (or a detached HEAD) at the same commit, the user's index
// and the work tree, so git status there shows what it shows locally, and
// the sandbox's .git/info/exclude gets the line "/.airlock"
// (sandbox.RuntimeDir; appended once, the lines there kept), so an agent's
// git add -A leaves the staged assets out. The sandbox's repository gets
// the local one's object format (SHA-1 or SHA-256); one of the other
// format is an error naming it. A second Prepare on the same sandbox
// sends only the commits it lacks; the whole history travels instead
// when the sandbox's repository turns out to lack objects that those
// commits or the trees of the snapshot, HEAD and the index need (objects
// only older history reaches are not checked: git fsck there tells).
// Prepare repairs what an earlier Prepare cut short left in the sandbox: an
// incomplete .git (an init cut short) is completed by git init, which
// overwrites nothing; lock files and half-written packs of a killed git
// and scratch files and refs of earlier rounds are removed; the work tree and index are reset as
// always. A repository git init cannot repair is an error naming it and
// saying to remove it. Ignored files and Spec.Exclude do not travel
// (ignored as the user's own git ignores them: the repository's rules,
// git's default global ignore file and the user's core.excludesFile of
// the global configuration), nor does what the user staged under an
// excluded path (the sandbox's index holds there what HEAD holds; the
// user's index keeps it); committed history always travels whole (a shallow clone,
// whose history stops short, is refused: ErrRepo). A
// submodule travels as its commit (an empty directory in the sandbox),
// and an untracked repository inside the work tree (a directory with a
// .git of its own) does not travel, as git add -A leaves it out; what
// the agent writes inside a submodule's directory does not come back
// (the directory is listed in Result.Refused). A path the user's sparse
// checkout leaves out (skip-worktree) travels as the index holds it; the
// agent's change of it is refused on Restore, never taken for the user's
// deletion.
// A file Prepare sent that the sandbox's git later ignores (a .gitignore
// line the agent wrote) still comes back as the sandbox holds it, never
// as a deletion. A new file the sandbox's git ignores does not come back
// and is not listed: by a .gitignore the agent wrote (which arrives, so
// the rule shows), and also by a line the agent added to the sandbox's
// .git/info/exclude, a core.excludesFile it set there, or the default
// global ignore file of the sandbox's user ($XDG_CONFIG_HOME/git/ignore or
// ~/.config/git/ignore, which the sandbox's git reads although it reads
// no global configuration) (none of which arrive).
//
// Restore snapshots the sandbox's work tree the same way (the agent's
// assume-unchanged and skip-worktree bits cleared, and the settings of
// the sandbox's configuration that would let a change pass unseen
// overridden: core.trustctime, core.checkStat, core.ignoreStat, the
// untracked cache, core.ignoreCase, and core.fileMode, taken from what the
// file system keeps of an executable bit; git compares stat times in whole
// seconds, so an edit of the same size in the same second as the agent's
// last index refresh, with its modification time set back, is the one
// change no stat check sees) and receives one incremental bundle (without
// the commits the local history already holds, such as those an earlier
// Restore of the round brought): it is checked with git bundle verify and list-heads
// (any ref besides the one asked for is listed in Result.Refused; refs are
// never taken from a bundle), and its pack is indexed into a quarantine
// object directory (<git dir>/objects/airlock-quarantine-…, removed
// afterwards) with index-pack --strict (fsck, every warning fatal). When
// it passes and neither the sandbox's new commits nor its snapshot hold a
// path under sandbox.RuntimeDir or matching Spec.Exclude, the pack moves
// into the repository and the snapshot goes to a private ref that is
// deleted afterwards.
//
// Sandbox commits that hold such a path (an agent's git add -f .airlock,
// or a commit of an excluded file) are rewritten, not refused: users
// expect the agent's commits to arrive, and the rest of such a commit is
// as much the agent's work as any other. The rewrite runs on the host,
// from the quarantined objects: in each such commit those paths are set
// to what its first parent holds there (gone when the agent added them;
// the local version when the local history tracks them), every commit
// above one rewritten gets the new parents, and author, committer, dates,
// message and other headers are kept byte for byte (signatures are
// dropped: they would no longer match). Only the rewritten commits and
// what they reach move into the repository, checked by the strict fsck
// again; the original commits and the objects only they reach never
// enter the repository's object store. Result.Rewritten lists each
// rewritten commit's old and new id. So the local HEAD, index, work tree
// and refs never hold the runtime directory or the agent's version of an
// excluded path, and every other change of those commits arrives.
//
// A pack that fails the strict fsck (a tree entry named "..", ".git" in
// any case, or holding a slash) is indexed into the quarantine again,
// without --strict: the snapshot is merged from there entry by entry (a bad path is listed
// in Refused), and the sandbox's commits (rewritten as above) move into
// the repository only when they pass the strict fsck on their own. Commits
// that do not are refused: the bad paths in their trees (or "commit <id>"
// for another fsck error) are listed in Refused, the local HEAD stays, and
// their content arrives through the snapshot as uncommitted edits; none of
// their objects enters the repository. A bundle larger than [WithMaxBytes]
// fails with ErrTooLarge, and one git cannot read, or without the snapshot
// the stream names, with ErrHostile: the whole restore fails closed,
// nothing is written and no part of the bundle is kept. When the histories
// diverged, the merge is tried before any file is written, and a conflict
// fails with a *ConflictError with nothing changed. A round prepared on an
// unborn branch, where the user made a first commit too, merges the two
// first commits over the empty tree; in any other round, sandbox commits
// that share no history with the local HEAD (its branch was replaced since
// Prepare) fail with ErrConflict, with nothing changed. The sandbox's HEAD is
// integrated by fast-forward when the local HEAD is its ancestor, else by
// a merge commit (git merge-tree --write-tree and commit-tree, committer
// from [WithCommitter]); the ref moves by compare-and-swap (git update-ref
// ref new old), retried a bounded number of times. Index entries that
// still matched the old HEAD follow the new one; entries the user staged
// differently are left alone. No new commits is a result, not an error.
//
// # What the agent staged
//
// What the agent staged comes back staged. The restore script compares
// the sandbox's index with the index the round's Prepare gave it (the
// baseline index: the user's, as it was) and reports each path where
// they differ: an entry added or changed (git add, a mode change, a
// staged hunk beside an unstaged one), removed (git rm, git rm --cached),
// or added as intent-to-add (git add -N); git mv R R2 is R removed and R2
// added, which git status reads as the rename. The report is parsed
// strictly (a path that is not clean or escapes, a malformed record, is
// ErrHostile), and the objects it names travel in the restore's bundle,
// under a commit of the sandbox's index tree that is the snapshot's last
// parent: each must be a blob that the bundle brought or the repository
// holds, or the restore fails with ErrHostile before anything is
// written. An entry under .git (in any spelling a file system reads as
// .git) or the runtime directory, one with a temporary file's name, and
// a submodule (gitlink) are listed in Result.Refused; one matching
// Spec.Exclude is left out, as its file is.
//
// After the work tree, before HEAD moves, the entries are merged into the
// local index by the rule of the work tree, against the baseline index: a
// path whose local index entry is still the baseline's gets the sandbox's
// entry; one the user changed (git add, git rm, a mode, an intent-to-add
// entry, a merge left unmerged) keeps the user's entry and is listed in
// Kept, unless it already is the sandbox's (the baseline index moves with
// each Restore, as the work tree's does: see the 3-way merge below). An
// entry at a path the work tree refused is not staged either; a staged
// symbolic link is staged only when the work tree holds that very link after
// the restore (so its target passed the link rules, or is the user's own);
// an intent-to-add entry needs its file in the work tree; an entry the local
// index leaves no room for (the user's entry d stays where the sandbox's d/x
// needs a directory, or the reverse) is refused. Paths the sandbox did not
// change in its index are never touched. The merge runs on a copy of the
// index while Restore holds git's own lock on it (<git dir>/index.lock), and
// the copy replaces the index by rename: a git that writes the index
// meanwhile waits, or fails as it does on any lock, and a reader sees the
// old index or the new one. A lock that stays a few seconds (another git, or
// one that was killed) fails the Restore with ErrRace naming it, after the
// work tree and before the index and HEAD moved; Restore again once it is
// gone. The blobs the entries name move into the repository first (checked
// by the strict fsck when they come from the quarantine). A sandbox index
// that cannot be written as a tree (unmerged entries, a path that is both a
// file and a directory, such as a and a/x, or an object it names is missing)
// brings nothing of its staged state back: the work tree and the commits
// arrive, no entry of the sandbox's index reaches the local index,
// Result.StagedDropped says why (it is "" whenever the staged state came
// back), and a warning is logged. Restoring again changes nothing: the
// entries then already are the sandbox's.
//
// # Plain directories
//
// Prepare clears Spec.Remote except sandbox.RuntimeDir and sends the tree as
// one tar stream (read through internal/tree, links skipped); its manifest
// is the baseline. Last it writes the round's id in the sandbox
// (sandbox.RuntimeDir/.workspace-round, never listed in Result.Runtime).
// Restore reads the sandbox's tar stream as hostile, and only from a
// directory that holds that id: a sandbox reset or replaced since Prepare
// (a container made again, an emptied directory, another round prepared
// there) would otherwise read as the agent having deleted every file. It
// fails, saying so, and changes nothing locally; prepare a new round. So
// does a sandbox whose runtime directory was removed or replaced, as a git
// round's Restore fails when its refs/airlock/base went. (A
// round prepared before this mark existed is restored without it.)
//
// A sandbox may share the host's file system (sandbox.Local, a container or
// bwrap with a bind mount). Before it writes anything, Prepare (of either
// kind) refuses with ErrSpec a Remote that is Local, a directory above it,
// or one inside it there, comparing physical paths (links resolved on
// both sides) and directories (a bind mount may show a directory of Local
// at any path): clearing it would delete the local files. The probe
// reports Remote's physical path and the device and inode of it and of
// each directory above it, which the host compares with Local's
// directories and those above Local; a match is confirmed by an empty
// marker file (.airlock-overlap-<random>) the host writes in the matching
// directory and removes at once (a sandbox on another machine may show
// the same numbers by chance; a host killed in that instant leaves the
// file). Prepare also refuses, with ErrSpec, a Remote with a file system
// mounted inside it (a mount of Local, or of any directory: clearing
// Remote would enter it; one in sandbox.RuntimeDir, which Prepare leaves
// alone, is not refused) or a part of it mounted elsewhere (a Local that
// is a bind mount of a directory in Remote), where the sandbox has
// /proc/self/mountinfo (Linux); a Remote that is itself a mount point is
// prepared. A sandbox that cannot make these checks (neither stat nor ls
// to identify directories; no awk, and a Remote path its sh cannot
// compare: a space, tab, newline or backslash in it) is a *ToolError, and
// nothing is cleared.
//
// # The 3-way merge (both kinds)
//
// Against the round's baseline: a remote change beats the baseline; a local
// edit beats a remote change or deletion (reported in Kept); a deletion
// applies only to an entry still equal to the baseline; a non-empty
// directory is never deleted. The baseline is what Prepare sent until a
// Restore succeeds; then, at each path where the host now holds the
// sandbox's entry (it arrived, or already was the host's), the baseline
// becomes that entry, in the work tree and, for git, in the index. So a
// round restored again brings the agent's later work, and a later revert in
// the sandbox arrives as a revert; where a local edit was kept or an entry
// refused, the baseline stays, and the edit is kept (and listed) again, the
// entry refused again. A plain round's baseline keeps the links a Restore
// brought, so the agent's later retarget or deletion of one arrives too. A
// Restore that fails once it has written some of the work tree (a write
// error, ErrRace, a cancellation) moves the baseline for what it wrote, so
// that the agent's next change of those paths arrives on the next Restore.
// The moved baseline is saved with the round (Reopen has it); when that save
// fails, the Restore fails saying so, the round in memory has the moved
// baseline, and its next Restore saves it. Files are written atomically
// (temporary file and rename) through an os.Root on the work tree;
// permission bits are kept without setuid, setgid and sticky bits (a git
// round writes a file as git checks one out: 0666, or 0777 when
// executable, less the umask and a default ACL, so a user whose umask is
// 077 gets 0600; a plain round writes the sandbox's bits less those the
// host's umask withholds, unless the user's entry had them at Prepare, so
// a sandbox's chmod 0777 arrives as 0755 under umask 022 and a user's
// group-writable 0664 file comes back 0664). A sandbox file that had one of those bits is written without
// it and also listed in Result.Refused (it may then be in Updated too):
// Refused names every sandbox entry that did not arrive as the sandbox left
// it. Directories lose those bits silently.
//
// In a git round HEAD still moves to the agent's commits where a local
// edit was kept: the kept file holds the user's version, so against the
// new HEAD it shows the agent's committed change of it undone (and a file
// the user deleted shows as deleted). Nothing is lost (the agent's change
// is in HEAD), but a later `git commit -a` would revert it: review Kept
// before committing. A file both sides changed only by commits (the local
// file is the local HEAD's, the sandbox's is the sandbox HEAD's) is no
// local edit: the work tree and the index take the merge's version (the
// sandbox HEAD's where its commits fast-forward the local HEAD, as after
// a local reset), as git merge writes it, and it is not in Kept. Left
// alone, as before: a path the sandbox did not change since the last
// Restore (a file of an earlier Restore that the user's reset removed
// stays removed, against HEAD), and the target of a rename the merge
// carried a change into.
//
// Kept means only that a local edit won. Every sandbox entry that does
// not arrive for any other reason is in Refused, with the reason in
// Result.Reasons, except the entries of the runtime directory, which
// never arrive by design and are listed in Result.Runtime. Everything is decided before anything is written (for
// a plain directory: once the whole stream is read, for its links and
// the entries that replace a local directory), so the order in which the
// sandbox lists its entries changes nothing.
//
// A change of type between rounds (file, link, directory, either way)
// applies completely or is refused completely. An entry that replaces a
// local directory arrives only when everything below that directory is
// an entry the restore deletes; otherwise it is refused (the reason names
// the local entry in the way: a local edit, or an untracked or ignored
// file) and the deletions below it are refused with it, so the directory
// stays whole. What the sandbox put below an entry that was a file or a
// link arrives once that entry is removed; when a local edit of it is
// kept, what lies below is refused. A plain directory's round does not
// send links, so a local link (or special file) the sandbox never saw
// refuses the sandbox entry at its path and everything below it. An entry
// refused for what it is (a name the host refuses, a FIFO, a file with
// several links, a reserved name) leaves the local entry at its path as
// it is, with everything below it: a local directory the sandbox replaced
// by such an entry keeps its files.
//
// Every link the restore writes resolves inside the work tree in the tree
// as restored. Its target is walked component by component from the
// link's directory: it may not be absolute, climb above the top, end at
// the top, enter .git or the runtime directory, or pass through any link
// (one this restore writes, refused or not, or one already local). And a
// local link whose target would then resolve through a link the restore
// writes (a directory replaced by a link under a local link's path)
// refuses that link. A refused link is listed with its reason; a dangling
// link that stays inside is written.
//
// A plain directory's round changes the work tree only once the whole
// stream has arrived (it ends with an end line the sandbox writes after
// its tar succeeded; a tar stream cut between two members would
// otherwise read as whole) and the sandbox's command exited 0: meanwhile
// each file that arrives is spooled in the local runtime directory and
// the directories the stream needs are only noted. A cut, a failed
// command, a refused stream or a host killed meanwhile leaves the work
// tree as it was (a killed host's spooled files are swept by the next
// Prepare or Restore). Then the directories are made, the files placed,
// and an entry that replaces a local directory is made beside it before
// the directory goes, so a write that fails there leaves the directory.
// A directory's permission bits follow the rule of a file's content:
// the sandbox's change of them arrives (listed in Updated) when the
// local directory still has the baseline's bits; a local change stays.
//
// A work-tree write that fails (ENOSPC, EDQUOT, EIO, a read-only
// directory) fails the Restore with an error naming the path and
// wrapping the cause (errors.Is(err, syscall.ENOSPC) holds). A git round
// writes the work tree before it moves any ref, so HEAD and the refs have
// not moved; the round's state is kept and the sandbox still holds
// everything: once the cause is fixed, Restore again (also after Reopen)
// brings what did not arrive (what did is then already equal). A git
// command that fails for the same host reasons (a full disk while
// storing the sandbox's objects) is the same kind of error, never
// ErrHostile.
//
// # Guarantees
//
//   - Nothing reads or writes a git remote; git remote stays empty on both
//     sides. Host git runs with hooks off, system and global configuration
//     ignored (read only for the checkout conversions below and the
//     user's core.excludesFile, from the files the user's git reads,
//     GIT_CONFIG_GLOBAL included), no prompt,
//     and the host's GIT_* variables removed (internal/gitexec); sandbox
//     scripts do the same.
//   - A missing or too old tool (host git 2.38; in the sandbox git 2.20 for
//     a git work tree, tar for a plain directory) is a *ToolError naming
//     it, before anything is changed. The sandbox's find is used when
//     present; without it an sh walk (test(1) and ls -ln) makes the same
//     report.
//   - Sandbox content is hostile. A path that is not clean or escapes, a
//     symbolic link whose target leaves the work tree, a FIFO, socket or
//     device, a regular file with several links, a path with a .git
//     component or under sandbox.RuntimeDir (also as a case-folding, HFS+
//     or NTFS file system would read the name: ".GIT.", "git~1"), a path
//     the sandbox's git did not add, a submodule, and a file past
//     [WithMaxBytes] is never written and is listed in Result.Refused, and
//     so are a bundle's extra refs and the paths of commits it refuses; a
//     malformed stream or unreadable bundle fails with ErrHostile and
//     writes nothing.
//   - One error class per failure kind: a sandbox that broke the protocol
//     (a probe, restore header, report, staged section or tar stream that
//     does not parse, a bundle that does not verify) is ErrHostile, which errors.Is also
//     matches to sandbox.ErrProtocol; a reply cut by a lost connection, a
//     Runner that never returned or an expired control deadline wraps
//     sandbox.ErrTransport. Never both. A command whose run failed on the
//     transport by itself is ErrTransport whatever it sent: an exec engine
//     that failed before it reached the sandbox prints its own error where
//     the stream should be (docker's "OCI runtime exec failed", exit 126),
//     and only the output of a command that ended normally is judged. A
//     Runner's failure on the host
//     itself (its temporary file on a full disk, an output write that
//     failed: see sandbox.Control) is neither: it is returned as it is,
//     with its path. The scripts and their parsers are
//     internal/shell's, checked in its tests under dash and busybox sh.
//     A plain sandbox's stream is read up to WithMaxBytes of file content:
//     at the file past it the host stops reading, and the restore fails
//     with ErrTooLarge (not the broken pipe the sandbox's tar then dies
//     of); nothing is written or deleted, and a Restore with a larger
//     limit completes.
//   - The runtime directory never comes back. Each entry at the top of the
//     sandbox's sandbox.RuntimeDir is listed in Result.Runtime, not in
//     Refused, so assets staged there show as, for example,
//     ".airlock/skills" without alarming a host that alerts on Refused;
//     what lies deeper is covered by that entry. A runtime directory that
//     is not a directory (a link, a file) is listed in Result.Refused as
//     ".airlock".
//   - Leftovers of a killed host are removed. The temporary refs
//     (refs/airlock/tmp/<owner>/…, refs/airlock/restore/<owner>/…),
//     quarantine directories (<git dir>/objects/airlock-quarantine-<owner>-…)
//     and scratch files in the state directory (and a marker beside the
//     state of a round whose Prepare has not returned) carry their owner:
//     the pid and its start time. The next Prepare or Restore of the repository
//     removes those whose owner is gone (no such process, a zombie, or
//     another process under the same pid) and never one whose owner runs.
//     Restore refs in the layout of earlier versions go too (made under
//     the restore lock that Restore holds).
//     So do the lock files a killed git left beside such a ref, the lock
//     of a Prepare's scratch index and the temporary files of state files
//     (written as .airlock-tmp-<owner>-<random> in the state directory);
//     a lock on the local branch itself is never removed (it may be the
//     user's git): one that outlasts every compare-and-swap attempt is
//     named in the ErrRace, with what to do. In the
//     work tree, a restore writes each file and link under a temporary
//     name in its directory, .airlock-tmp-<owner>-<random> (a fixed
//     length: a target of NAME_MAX bytes is written like any other), and
//     renames it into place; before the first one in a directory it
//     records the directory in a journal beside the restore lock
//     (writes-<owner>-<random>.journal), removed when it returns. The next
//     Prepare or Restore of the work tree reads the journals whose owner
//     is gone and removes the temporary files in the directories they
//     list whose owner is gone (no walk of the work tree). Where a plain
//     restore replaces a local directory by the sandbox's file or link,
//     it makes that under a temporary name beside the directory and
//     journals the rename before the directory goes: a host killed in
//     between has the next sweep complete the rename (when nothing stands
//     at the path again), so the missing directory is never read as a
//     local deletion. Prepare never
//     sends a temporary file to the sandbox, and a sandbox entry with
//     such a name is refused. A plain restore's report in the sandbox's
//     runtime directory (restore-<round>.<token>.<pid>, the token the
//     host's for each run) is removed by the next restore once its shell
//     is dead or a zombie (a restore whose report went so while it was
//     written, its shell in a PID namespace the other cannot see, fails
//     and is retried); a git restore's scratch
//     files (.git/airlock-restore-<round>-<pid>-<token>.*), its bundled
//     ref (refs/airlock/out/<round>/<pid>-<token>/snap) and their locks,
//     named by the round, the shell's pid and a token the host draws for
//     each run, by the next restore of the round once that shell is dead
//     or a zombie. So a Restore retried at once after a cut connection
//     never meets the scratch files of the run it retries, which may
//     still be going in the sandbox (a cut connection or a killed exec
//     client does not stop it).
//   - A name the host's file system does not accept (too long for it, or
//     an encoding or character it does not store: ENAMETOOLONG, EILSEQ,
//     EINVAL) is listed in Result.Refused with the reason, and the rest
//     arrives; a plain directory's entry whose name holds a backslash is
//     refused, under the path as the sandbox wrote it, and the local entry
//     at that path (and all below it) stays as it is.
//   - A git Restore while a rebase, bisect, cherry-pick, revert or merge
//     is stopped half-way in the local repository fails with ErrRepo
//     before it reads the sandbox, saying how to end it: integrated there,
//     the agent's commits would land on the operation's HEAD, which the
//     operation's abort leaves behind (a merge's abort resets the index
//     and work tree, the agent's staged new files with them).
//   - Restores of one work tree are serialized by a lock (flock on
//     <git dir>/airlock/restore.lock, or <Local>/.airlock/restore.lock for
//     a plain directory); a dead owner's lock is free at once; the wait is
//     bounded and ends in ErrLocked.
//   - Prepares and restores of one sandbox work tree take turns in the
//     sandbox: each script locks <Remote>/.airlock/.workspace-prepare
//     before it reads or changes anything (flock(1) where the sandbox has
//     it, which the kernel drops with its holder; else a pid file,
//     .workspace-prepare.pid recording its shell's pid and start time,
//     taken over once that shell is gone: a pid that a restarted
//     container gave to another process is no holder), waits
//     up to 30 seconds for another, then fails with ErrLocked. A Prepare
//     retried after a cut connection, while the first attempt's script
//     still checks out in the sandbox, so runs after it, and an agent
//     started after the retry returned never has its work undone by the
//     first attempt's checkout or git clean; a restore never reads a tree
//     a prepare is changing. A prepare script that takes the lock after a
//     prepare begun later (by the host's clock) took it, a command
//     delivered late, stops before it changes anything (exit status 23,
//     "a later prepare … already prepared"). Before a prepare changes the
//     work tree it removes what makes the sandbox an earlier round's (a
//     plain round's marker, a git round's refs/airlock/base/<round>): a
//     prepare cut or killed after that leaves the earlier round's Restore
//     refusing the sandbox, never reading a cleared or another tree as
//     the agent's deletions. The lock file stays in the runtime
//     directory; a restore of a sandbox whose runtime directory the agent
//     replaced by a link or a file runs without it.
//
// # Non-guarantees
//
//   - The baseline of a git round is a commit kept only as unreferenced
//     objects; a git gc --prune=now or git repack -a -d during the run
//     loses it, and Restore then fails naming the missing tree and saying
//     that the agent's work must be copied from the sandbox by hand (the
//     default gc and git maintenance keep such objects for two weeks).
//   - A sandbox that stalls mid-stream (neither sends nor ends) holds a
//     Restore, as any data step, until ctx ends: bound it with a deadline
//     that fits the work tree's size. Restoring again after such a stall
//     only helps once the sandbox answers.
//   - The host trusts its own state directory and its own git.
//   - A local file changed between the check and the write of a restore
//     may be overwritten (there is no lock against other writers of the
//     work tree); a parent directory swapped for a link is refused, but
//     only as of the moment it was checked.
//   - ErrRace (the local ref kept moving) comes after the sandbox's files
//     were merged into the work tree; restoring again, when the ref is
//     quiet, installs the commits (the files then already match). So does
//     a *ConflictError that appears only on a compare-and-swap retry (the
//     local ref moved to a conflicting commit during the restore).
//   - The prepare lock's pid file (a sandbox without flock(1)) reads a
//     holder in another PID namespace (an engine that runs each command
//     in its own) as gone; and a host clock set back between two Prepares
//     has the later refused as superseded until the clock passes the
//     earlier's start.
//   - Files are not fsynced.
//   - A host killed while it holds the index lock leaves
//     <git dir>/index.lock, as a killed git does. The next Prepare or
//     Restore removes it when it is the file the killed host made (it is
//     made as a link to a file in the state directory that names its
//     owner); with a state directory on another file system it cannot be
//     told from a git's, and stays until the user removes it, as git
//     names it.
//   - Restore compares and writes a git work tree's files as the user's
//     own git would check them out (convert.go): a local file equals a
//     blob when its bytes or its clean form (git hash-object) do, and a
//     blob is written in its checkout form (git cat-file --filters):
//     .gitattributes text, eol, ident, working-tree-encoding and filter
//     drivers, and core.autocrlf and core.eol, read with the user's
//     system and global configuration (where git lfs install puts its
//     driver). The work tree's attributes decide the comparison as they
//     are before the Restore writes; the .gitattributes files the Restore
//     brings are written first and decide the form of the files written
//     with them, as in a checkout. A smudge that fails fails the Restore,
//     naming the file, which stays as it was; a clean form that cannot be
//     read makes the file a local edit (Kept). git-lfs's smudge runs with
//     GIT_LFS_SKIP_SMUDGE=1, so that no LFS server is contacted: a pointer
//     the sandbox wrote arrives as that pointer (git lfs pull fetches its
//     object); any other driver is the user's command and does what it
//     does in a checkout. The byte limit ([WithMaxBytes]) counts the
//     blobs' sizes. Equal bytes decide without a clean form (a file sent
//     as a dirty edit is the baseline as the sandbox's git stored it), so
//     a local edit whose bytes are exactly a blob's stored form counts as
//     that blob: only a driver whose clean changes content (rot13,
//     encryption) lets a user write one. Prepare decides what is dirty
//     with the repository's configuration alone: a file that differs from
//     its blob there but not under the user's global configuration (ident
//     with a global core.autocrlf) travels as a dirty edit, its baseline is
//     what the sandbox's git stored, and the agent's change of it is Kept.
//   - The sandbox's git converts with the repository's attributes and its
//     own configuration. A filter driver the sandbox lacks leaves the
//     blob's bytes in the sandbox's checkout; a dirty local file under
//     such a driver travels in its checkout form and the sandbox's git
//     stores it so, and if the agent changes it, Restore applies the
//     host's smudge to that form once more (git-lfs passes a file that is
//     not a pointer through unchanged).
//   - Intent-to-add entries of the user's index do not travel (the
//     sandbox gets the index's tree); a local intent-to-add entry counts
//     as a change of the user's.
//   - The tar writer and hostile tar reader live in tarstream.go until the
//     shared internal package of stage lands.
package workspace
