package shell

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The scripts of a workspace round (package workspace): the probe, the
// two prepares and, in restore.go, the two restores.

// GitPrelude starts every sandbox script that runs git: the sandbox's
// own GIT_* redirections are dropped, system and global configuration
// ignored, hooks off, no prompt; g runs git so, with the settings of the
// sandbox's own .git/config that would thin or alter a checkout or a
// snapshot overridden: sparse checkout off, symbolic links as links, case
// significant in names, core.fileMode as the file system keeps modes (see
// fileModeProbe), and the settings that would have a snapshot trust stat
// data the agent can set (core.trustctime off, core.checkStat minimal and
// core.ignoreStat on let an edit of the same size whose modification time
// is set back pass as unchanged; the untracked cache, with a directory's
// time set back, a new file). The scripts then pin both GIT_DIR and
// GIT_WORK_TREE (a core.worktree there would move the work tree
// elsewhere). gone PID… says whether the shell of the pid a name starts
// with is gone (no such process, or a zombie); gone_files PREFIX removes
// each regular file PREFIX<pid>… whose shell is gone.
const GitPrelude = `unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE GIT_COMMON_DIR GIT_CEILING_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_EXEC_PATH GIT_TEMPLATE_DIR GIT_SSH GIT_SSH_COMMAND GIT_EXTERNAL_DIFF GIT_PAGER GIT_EDITOR GIT_QUARANTINE_PATH GIT_REPLACE_REF_BASE GIT_NO_REPLACE_OBJECTS GIT_GRAFT_FILE GIT_SHALLOW_FILE GIT_DISCOVERY_ACROSS_FILESYSTEM GIT_LITERAL_PATHSPECS GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS GIT_TRACE 2>/dev/null
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0 LC_ALL=C
` + goneFuncs + `gone_files() { for _gf in "$1"*; do [ -f "$_gf" ] && [ ! -L "$_gf" ] && gone "${_gf#"$1"}" && rm -f "$_gf"; done; }
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c gc.auto=0 -c maintenance.auto=false -c core.autocrlf=false -c core.quotePath=false -c core.sparseCheckout=false -c core.symlinks=true -c core.trustctime=true -c core.checkStat=default -c core.ignoreStat=false -c core.untrackedCache=false -c core.ignoreCase=false ${gfm:+-c core.fileMode=$gfm} "$@"; }
`

// goneFuncs defines gone (see GitPrelude).
const goneFuncs = `gone() { _gp=${1%%[!0-9]*}; [ -n "$_gp" ] && kill -0 "$_gp" 2>/dev/null || return 0; _gs=$(cat "/proc/$_gp/stat" 2>/dev/null); _gs=${_gs##*) }; _gs=${_gs%% *}; case $_gs in Z|X) return 0;; esac; return 1; }
started() { _gs=$(cat "/proc/$1/stat" 2>/dev/null) || return 0; set -- ${_gs##*) }; [ $# -ge 20 ] && eval "echo \"\${20}\""; }
`

// Exit statuses of both prepare scripts (prepareLock).
const (
	// PrepareUnusable: the runtime directory cannot hold the prepare lock.
	PrepareUnusable = 21
	// PrepareLocked: another prepare of the work tree still ran in the
	// sandbox after PrepareLockWait seconds.
	PrepareLocked = 22
	// PrepareSuperseded: a later prepare (by its Seq) already began to
	// prepare the work tree; this one changed nothing.
	PrepareSuperseded = 23
	// PrepareLockWait is how many seconds a prepare waits for another
	// unless its PrepareTurn says otherwise.
	PrepareLockWait = 30
)

// PrepareTurn is what a prepare script needs to take its turn
// (prepareLock).
type PrepareTurn struct {
	// Seq orders the prepares of one work tree: the host's clock in
	// microseconds when Prepare began.
	Seq int64
	// Wait is how many seconds to wait for another prepare; 0:
	// PrepareLockWait.
	Wait int
}

// vars sets seq and pwait.
func (t PrepareTurn) vars() string {
	w := t.Wait
	if w <= 0 {
		w = PrepareLockWait
	}
	return fmt.Sprintf("seq=%d; pwait=%d\n", t.Seq, w)
}

// supersedeWindow bounds, in microseconds (a day), how far ahead of a
// prepare's Seq a recorded one is taken for a later prepare's.
const supersedeWindow = "86400000000"

// PrepareLockName is the file in the runtime directory that a prepare
// locks, and in which it records its shell's pid and its Seq.
const PrepareLockName = ".workspace-prepare"

// prepareLock (in the work tree; seq and pwait set: PrepareTurn; gone
// defined) makes the prepares of one
// sandbox work tree take turns: a prepare whose host gave up (a cut
// connection, a cancelled context) may still run in the sandbox while the
// host's retry runs, and the later of the two to check out would write
// the work tree under an agent that already works in it (an outside
// attack's finding). The lock is an flock(1) on PrepareLockName where
// flock exists (the kernel drops it with its holder, in any PID
// namespace); elsewhere a file PrepareLockName.pid made with noclobber,
// taken over when its shell is gone (gone: a holder in another PID
// namespace reads as gone). A prepare waits PrepareTurn.Wait seconds for
// another, then fails (PrepareLocked). Holding the lock, it refuses to
// run when the last prepare to hold it had a later Seq (the host's clock
// when Prepare began: a script that started late must not undo a later
// prepare; PrepareSuperseded), and records its own; a recorded Seq more
// than supersedeWindow ahead is no prepare's (garbage the sandbox wrote,
// a clock far off) and is overwritten. The lock file stays:
// removing a file others may hold flock on would let two hold it.
const prepareLock = `pl=` + RuntimeDir + `/` + PrepareLockName + `
if [ -L ` + RuntimeDir + ` ] || { [ -e ` + RuntimeDir + ` ] && [ ! -d ` + RuntimeDir + ` ]; } || ! mkdir -p ` + RuntimeDir + ` 2>/dev/null; then
  echo "$r/` + RuntimeDir + ` is not a directory airlock can use (a link or a file?): remove it and prepare again" >&2; exit 21
fi
` + lockTake + `pl_line=$(dd if="$pl" bs=64 count=1 2>/dev/null) || pl_line=
pl_line=${pl_line%%"$nl"*}; pl_pid=${pl_line%% *}; pl_seq=${pl_line#"$pl_pid"}; pl_seq=${pl_seq# }
case $pl_seq in ''|*[!0-9]*) pl_seq=0;; esac
if [ "${#pl_seq}" -le 18 ] && [ "$pl_seq" -gt "$seq" ] && [ "$((pl_seq - seq))" -le ` + supersedeWindow + ` ]; then echo "a later prepare already prepared $r: this one stopped before changing anything; prepare again if the work tree should hold this round (a host clock set back does this too: then remove $r/$pl)" >&2; exit 23; fi
printf '%s %s\n' "$$" "$seq" > "$pl" || { echo "cannot write the prepare lock $r/$pl (a full disk?): free space in the sandbox and prepare again" >&2; exit 21; }
`

// lockTake (in the work tree, with $pl the lock file in a runtime
// directory that is one, $pwait set, gone defined) takes the work tree's
// lock for the rest of the script: flock(1) on $pl (fd 9) where the
// sandbox has flock, else the pid file $pl.pid (see prepareLock). A lock
// that is not a regular file fails at once (exit 21), one held past
// $pwait seconds with exit 22. Prepares and restores both take it, so a
// restore never reads a work tree a prepare is changing, and a prepare
// never removes a running restore's scratch files.
const lockTake = `nl='
'
for f in "$pl" "$pl.pid"; do
  if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then echo "$r/$f, the work tree's lock, is not a regular file (a link, a FIFO?): remove it and try again" >&2; exit 21; fi
done
pw=0
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$pl" || { echo "cannot open the work tree's lock $r/$pl (a full disk?): free space in the sandbox and try again" >&2; exit 21; }
  until flock -n 9; do
    pw=$((pw+1)); if [ "$pw" -ge "$pwait" ]; then echo "another prepare or restore of $r still holds its lock $r/$pl after $pwait seconds: wait for it to end or stop it, then try again" >&2; exit 22; fi
    sleep 1
  done
else
  ps0=$(started $$)
  until (set -C; printf '%s %s\n' "$$" "$ps0" > "$pl.pid") 2>/dev/null; do
    po=$(dd if="$pl.pid" bs=64 count=1 2>/dev/null) || po=; po=${po%%"$nl"*}; pst=${po#* }; [ "$pst" != "$po" ] || pst=; po=${po%% *}
    if { [ -n "$po" ] || [ "$pw" -ge 2 ]; } && { gone "$po" || { [ -n "$pst" ] && pnow=$(started "$po") && [ -n "$pnow" ] && [ "$pnow" != "$pst" ]; }; }; then rm -f "$pl.pid"; continue; fi
    pw=$((pw+1)); if [ "$pw" -ge "$pwait" ]; then echo "another prepare or restore of $r still holds its lock $r/$pl.pid (pid $po) after $pwait seconds: wait for it to end or stop it (or remove $r/$pl.pid if none runs), then try again" >&2; exit 22; fi
    sleep 1
  done
  trap 'po=$(dd if="$pl.pid" bs=64 count=1 2>/dev/null); po=${po%%"$nl"*}; [ "${po%% *}" = "$$" ] && rm -f "$pl.pid"' EXIT
fi
`

// RestoreLock (in the work tree, r and gone defined) takes the work
// tree's lock (lockTake) for a restore, waiting PrepareLockWait seconds;
// a runtime directory that is not one (the agent's link or file, which
// the restore reports) is no place for it, and the restore goes on
// without it (no prepare can take it there either).
var RestoreLock = `pl=` + RuntimeDir + `/` + PrepareLockName + `; pwait=` + strconv.Itoa(PrepareLockWait) + `
if [ ! -L ` + RuntimeDir + ` ] && { [ -d ` + RuntimeDir + ` ] || { [ ! -e ` + RuntimeDir + ` ] && mkdir ` + RuntimeDir + ` 2>/dev/null; }; }; then
` + lockTake + `fi
`

// fileModeProbe (in the work tree, with .git a directory) sets gfm, which
// g passes as core.fileMode, to what the work tree's file system keeps of
// an executable bit: true where a file's chmod +x and -x both show, else
// false. The sandbox's own core.fileMode (an agent's false) would hide the
// agent's chmod from the snapshot; forcing true where the file system
// keeps no such bit would show every file changed. The probe file is
// named by the shell's pid (and a restore's token); one whose shell is
// gone (a killed command's) goes first, one whose shell runs (a restore
// that overlaps this one: its host was cut off, the command was not) is
// left alone (gone_files, in GitPrelude).
const fileModeProbe = `gfm=false; gf=.git/airlock-fm-$$-${tok:-0}
gone_files .git/airlock-fm-
if (set -C; : >"$gf") 2>/dev/null; then
  if chmod 755 "$gf" 2>/dev/null && [ -x "$gf" ] && chmod 644 "$gf" 2>/dev/null && [ ! -x "$gf" ]; then gfm=true; fi
  rm -f "$gf"
fi
`

// gitRepair makes the sandbox's repository usable, whatever an earlier
// prepare cut short left (it runs in the work tree, after the check that
// .git is not a link or a file): a missing or incomplete .git (an init cut
// short: no HEAD, objects or refs) is completed by git init, which creates
// what is missing and overwrites nothing; lock files and half-written
// packs (objects/pack/tmp_*) of a killed git, the scratch files of an
// earlier round and the refs whose object is missing (an objects directory
// emptied or cut short) are removed (the prepare owns the sandbox
// repository while it runs). A repository git still cannot open is a
// clear error (exit 12). Then GIT_DIR pins every git command to this
// repository (never one above it) and GIT_WORK_TREE to this directory, and the runtime directory is ignored
// through .git/info/exclude (appended once; the lines there stay). A
// new repository gets the object format $of names (empty: git's default,
// SHA-1); one that holds the other format is a clear error (exit 12).
const gitRepair = `usable() { GIT_DIR=.git g rev-parse --git-dir >/dev/null 2>&1; }
rm -rf .git/airlock-prepare-* .git/airlock-restore-* 2>/dev/null
if [ -d .git ]; then
  if command -v find >/dev/null 2>&1; then find .git -path .git/objects -prune -o -name '*.lock' -type f -exec rm -f {} + 2>/dev/null
  else rm -f .git/*.lock .git/refs/heads/*.lock 2>/dev/null; fi
  rm -f .git/objects/pack/tmp_pack_* .git/objects/pack/tmp_idx_* .git/objects/pack/tmp_rev_* 2>/dev/null
fi
if ! usable; then
  e=$(g init -q ${of:+--object-format="$of"} . 2>&1 >/dev/null)
  usable || { echo "the sandbox repository $r/.git is damaged and git init cannot repair it ($e); remove $r/.git and prepare again" >&2; exit 12; }
fi
export GIT_DIR=.git GIT_WORK_TREE=.
` + fileModeProbe + `f=$(g rev-parse --show-object-format 2>/dev/null)
case "$f" in sha1|sha256) [ "$f" = "${of:-sha1}" ] || { echo "the sandbox repository $r/.git holds $f objects and the local repository ${of:-sha1} ones: remove $r/.git and prepare again" >&2; exit 12; };; esac
g for-each-ref --format='%(refname)' 2>/dev/null | g cat-file --batch-check 2>/dev/null | while read -r n m; do if [ "$m" = missing ]; then g update-ref -d "$n" >/dev/null 2>&1; fi; done
mkdir -p .git/info || { echo "cannot create $r/.git/info; remove $r/.git and prepare again" >&2; exit 12; }
has=
if [ -f .git/info/exclude ]; then while IFS= read -r l || [ -n "$l" ]; do [ "$l" = /` + RuntimeDir + ` ] && has=1; done < .git/info/exclude; fi
if [ -z "$has" ]; then printf '\n# airlock: the runtime directory\n/` + RuntimeDir + `\n' >> .git/info/exclude || { echo "cannot write $r/.git/info/exclude" >&2; exit 12; }; fi`

// dropOthers defines drop_others, which removes the refs of every other
// round (refs/airlock/base/<other id>, and restores' refs/airlock/out)
// and fails (exit 16) unless none of another round's base refs is left.
// The prepare runs it before it changes the work tree: a prepare cut or
// killed after that point leaves the earlier round's Restore refusing the
// sandbox (its base is gone), never reading this round's tree as the
// agent's deletions (an outside attack: it deleted the user's files and
// an uncommitted edit). % is doubled: it goes through fmt.Sprintf.
const dropOthers = `drop_others() {
g for-each-ref --format='%%(refname)' refs/airlock/base refs/airlock/out | while read -r ref; do case "$ref" in "$base"/*) ;; *) g update-ref -d "$ref" ;; esac; done
do_left=$(g for-each-ref --format='%%(refname)' refs/airlock/base | while read -r ref; do case "$ref" in "$base"/*) ;; *) echo "$ref";; esac; done)
[ -z "$do_left" ] || { echo "cannot remove the earlier round's refs in $r/.git ($do_left; a full disk?): free space in the sandbox and prepare again" >&2; exit 16; }
}
`

// GitPrepare is what GitPrepareScript needs to know.
type GitPrepare struct {
	Remote string // the sandbox work tree
	ID     string // the round id
	Branch string // the branch HEAD names, "" for a detached HEAD
	Head   string // the commit HEAD is at, "" when unborn
	Snap   string // the snapshot commit (the work tree as sent)
	Index  string // the tree the index holds
	TmpRef string // the ref the bundle carries the snapshot under
	Bundle bool   // a git bundle arrives on stdin
	// ObjectFormat is the local repository's object format: "sha256", or
	// "" for SHA-1 (git's default).
	ObjectFormat string
	Exclude      []string // Spec.Exclude: what git clean keeps (anchored at the top, as the glob pathspecs read them; the runtime directory always is)
	Turn         PrepareTurn
}

// GitPrepareScript returns the script that makes the sandbox work tree
// p.Remote the prepared round: it creates or repairs the repository,
// takes in the bundle on stdin (when p.Bundle), records the round's base
// refs, points HEAD, and checks out the snapshot and the index. The
// bundle is never written whole: its header (the commits it requires) is
// checked by git bundle verify, then its pack is indexed as it arrives
// (index-pack --fix-thin, while the host's git still writes it), and the
// snapshot's objects must then be complete (rev-list --objects, the check
// git fetch makes, run beside the checkout: no ref names the snapshot
// before it passed). A thin bundle (one with prerequisites, which leaves
// out what the sandbox's commits hold) is checked against its
// prerequisites rather than the sandbox's refs, and the trees of the
// snapshot, HEAD and the index must be whole (rev-list --objects
// --no-walk), since the objects it leaves out are the sandbox's to hold: a
// sandbox that lacks some fails (exit 15), and the host sends the whole
// history instead. Objects of older history only (a blob of a commit
// before HEAD) are not checked: that would walk the whole history at
// every Prepare. The index is read with -m, so that each entry the
// checkout just wrote keeps its stat data and the refresh reads only the
// files whose staged content differs. It runs holding the work tree's
// prepare lock (prepareLock), taken before anything is changed. Its exit
// statuses 10 to 23 name the step that failed (the error on stderr says
// what to do).
func GitPrepareScript(p GitPrepare) string {
	hb := "0"
	if p.Bundle {
		hb = "1"
	}
	clean := "-e /" + RuntimeDir
	for _, e := range p.Exclude {
		clean += " -e " + Quote("/"+e) // anchored, as the glob pathspecs read the pattern
	}
	return GitPrelude + fmt.Sprintf(`r=%s; id=%s; br=%s; head=%s; snap=%s; idx=%s; hb=%s; tmp=%s; of=%s
%smkdir -p "$r" && cd "$r" || { echo "cannot enter $r" >&2; exit 10; }
if [ -L .git ] || { [ -e .git ] && [ ! -d .git ]; }; then echo "$r/.git is not a directory; remove it" >&2; exit 11; fi
%s%s
base=refs/airlock/base/$id
`+dropOthers+`if [ "$hb" = 1 ]; then
  b=.git/airlock-prepare-$id.bundle
  : > "$b" || { echo "cannot write $r/$b (a full disk?): free space and prepare again" >&2; exit 13; }
  h=; th=; pq=
  while IFS= read -r l; do
    if [ -z "$l" ]; then h=1; break; fi
    case "$l" in -*) th=1; l0=${l%%%% *}; pq="$pq ${l0#-}";; esac
    printf '%%s\n' "$l" >> "$b" || { rm -f "$b"; exit 13; }
  done
  if [ -z "$h" ] || ! printf '\n' >> "$b"; then rm -f "$b"; echo "the bundle's header did not arrive whole in $r/.git; prepare again" >&2; exit 13; fi
  if ! g bundle verify "$b" >/dev/null 2>.git/airlock-prepare-$id.err; then
    e=$(cat .git/airlock-prepare-$id.err); rm -f "$b" .git/airlock-prepare-$id.err
    echo "the bundle does not verify in the sandbox repository $r/.git: $e; remove $r/.git and prepare again" >&2; exit 14
  fi
  rm -f "$b" .git/airlock-prepare-$id.err
  g index-pack --stdin --fix-thin >/dev/null || exit 15
  drop_others
  if [ -n "$th" ]; then g rev-list --objects --quiet "$snap" --not $pq && g rev-list --objects --quiet --no-walk "$snap" ${head:+"$head"} "$idx"
  else g rev-list --objects --quiet "$snap" --not --all; fi & c=$!
  g read-tree --reset -u "$snap^{tree}"; s=$?
  wait "$c" || { echo "the bundle's objects do not complete $snap in $r/.git; prepare again" >&2; exit 15; }
  [ "$s" = 0 ] || exit 18
fi
g update-ref "$base/snap" "$snap" || exit 16
if [ -n "$head" ]; then g update-ref "$base/head" "$head" || exit 16; fi
if [ -n "$head" ]; then
  if [ -n "$br" ]; then g update-ref "$br" "$head" && g symbolic-ref HEAD "$br" || exit 17
  else g update-ref --no-deref HEAD "$head" || exit 17; fi
else
  g symbolic-ref HEAD "$br" || exit 17
  if g rev-parse -q --verify "$br" >/dev/null; then g update-ref -d "$br" || exit 17; fi
fi
if [ "$hb" != 1 ]; then drop_others; g read-tree --reset -u "$snap^{tree}" || exit 18; fi
g clean -fdq %s >/dev/null || exit 19
g read-tree -m "$idx" || exit 20
g update-index -q --refresh >/dev/null 2>&1
exit 0
`, Quote(p.Remote), Quote(p.ID), Quote(p.Branch), Quote(p.Head), Quote(p.Snap), Quote(p.Index), hb, Quote(p.TmpRef), Quote(p.ObjectFormat), p.Turn.vars(), prepareLock, gitRepair, clean)
}

// PlainPrepareScript returns the script that makes the sandbox directory
// remote the plain tree a tar stream on stdin holds (WritePlain, whose
// last member is the file modes, a name at the top the tree does not
// hold): everything there but the runtime directory is removed first, the
// stream is extracted, then modes sets every directory's permission bits
// and is removed, since the sandbox's tar may leave those of a directory
// it made itself alone. Last it marks the directory as round id's
// (RoundMarker in the runtime directory, made if missing), which
// PlainRestoreScript requires. It runs holding the work tree's prepare
// lock (prepareLock), taken before anything is removed. Exit 10: remote
// cannot be entered; 11: an entry cannot be removed; 12: the modes cannot
// be set; 13: the stream lacked modes; 14: the marker cannot be written;
// 21 to 23: the prepare lock (see PrepareLocked); otherwise tar's status
// when the extraction failed.
func PlainPrepareScript(remote, modes, id string, turn PrepareTurn) string {
	return goneFuncs + fmt.Sprintf(`r=%s; f0=%s; id=%s; rd=%s
%smkdir -p "$r" && cd "$r" || { echo "cannot enter $r" >&2; exit 10; }
%s`+dropMarker+`for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then
    [ "$f" = "$rd" ] && continue
    rm -rf -- "$f" 2>/dev/null || { chmod -R u+rwx -- "$f"; rm -rf -- "$f"; } || { echo "cannot clear $r/$f" >&2; exit 11; }
  fi
done
umask 0
tar -x -o -f -; s=$?
if [ "$s" != 0 ]; then rm -f -- "$f0"; exit "$s"; fi
if [ ! -f "$f0" ] || [ -L "$f0" ]; then echo "the tar stream lacked $f0, its last member: the transfer was cut; prepare again" >&2; exit 13; fi
if ! (. "./$f0"); then rm -f -- "$f0"; echo "cannot set the modes of the directories in $r; prepare again" >&2; exit 12; fi
rm -f -- "$f0"
umask 022
{ [ -L "$rd" ] || mkdir -p "$rd"; } && [ -d "$rd" ] && [ ! -L "$rd" ] && rm -f "$rd/%s" && printf '%%s\n' "$id" > "$rd/%s" || { echo "cannot write the round's marker $r/$rd/%s (is $rd a link or a file?); prepare again" >&2; exit 14; }
`, Quote(remote), Quote(modes), Quote(id), Quote(RuntimeDir), turn.vars(), prepareLock, RoundMarker, RoundMarker, RoundMarker)
}

// dropMarker (in the work tree, holding its lock) removes the earlier
// round's marker before anything of the tree is cleared: a prepare cut or
// killed after that point leaves no marker, so the earlier round's Restore
// refuses the cleared directory rather than read it as the agent's
// deletions (an outside attack: it deleted every local file). Exit 14
// when it cannot.
const dropMarker = `m=` + RuntimeDir + `/` + RoundMarker + `
if [ -e "$m" ] || [ -L "$m" ]; then rm -f "$m" 2>/dev/null; if [ -e "$m" ] || [ -L "$m" ]; then echo "cannot remove the earlier round's marker $r/$m: remove it and prepare again" >&2; exit 14; fi; fi
`

// RoundMarker is the file in a plain sandbox directory's runtime directory
// that names the round its Prepare sent (PlainPrepareScript): a Restore of
// that round requires it, so that a sandbox reset or replaced since (an
// empty directory, another round's) is never read as the agent having
// deleted every file.
const RoundMarker = ".workspace-round"

// MaxProbeHave bounds the commits a workspace probe may list.
const MaxProbeHave = 2000

// WorkspaceProbe is what a workspace sandbox said about itself.
type WorkspaceProbe struct {
	Tools      map[string]bool // "git", "tar": the tools it has
	GitVersion string          // "git version …" or ""
	Have       []string        // commit names the sandbox repository holds (refs and HEAD), at most MaxProbeHave
	// Real is the work tree's physical path: that of the deepest directory
	// of its path that exists, links resolved (cd -P; pwd -P), and the rest
	// of the path below it; the path as given where the sandbox cannot
	// tell. IDs are the device and inode numbers of Real and of each
	// directory above it, in that order up to / (the zero FileID where
	// stat reports none: a directory not made yet, no stat). At most
	// MaxProbeIDs.
	Real string
	IDs  []FileID
	// Mounts are the mount points strictly inside Real, or on a part of
	// it seen elsewhere (Mi; decoded), at most MaxMounts: a Prepare,
	// which clears the work tree (but its RuntimeDir), would delete the
	// files there.
	Mounts []string
	// MountsUnchecked reports a sandbox with /proc/self/mountinfo but no
	// awk that reads it: Mounts is empty because nothing could be read.
	MountsUnchecked bool
}

// FileID is a file's device and inode numbers; OK is false when unknown.
// From a sandbox without stat, a probe's id may hold the inode alone
// (NoDev, from ls -i), or say that a directory that exists could not be
// identified at all (Unknown; OK false).
type FileID struct {
	Dev, Ino uint64
	OK       bool
	NoDev    bool // Ino alone is known (Dev is 0)
	Unknown  bool // an existing directory neither stat nor ls could identify
}

// Same reports whether id and other name one file, as far as both are
// known: equal, or of one inode when either knows no device.
func (id FileID) Same(other FileID) bool {
	if !id.OK || !other.OK {
		return false
	}
	if id.NoDev || other.NoDev {
		return id.Ino == other.Ino
	}
	return id.Dev == other.Dev && id.Ino == other.Ino
}

// MaxProbeIDs bounds the IDs a workspace probe may list: one per path
// component of the work tree, and / (a path is at most 4096 bytes).
const MaxProbeIDs = 2049

// probeIDs prints the physical path of $r ("real PATH": see
// WorkspaceProbe.Real), a "mount PATH" line for each file system mounted
// inside it or on a part of it (Mi: see WorkspaceProbe.Mounts), or
// "unchecked awk" when Mi cannot tell, then an "id DEV INO" line for it
// and for each directory above it, up to /: stat -L (GNU, BusyBox) or
// stat -L -f (BSD); without stat "id - INO" (ls -dLi); for a directory
// that is not there "id - -", and for one neither could identify
// "id ? ?".
const probeIDs = `d=$r; e=
while [ ! -d "$d" ] && [ "$d" != / ]; do e=/${d##*/}$e; d=${d%/*}; [ -n "$d" ] || d=/; done
q=$(cd -P -- "$d" 2>/dev/null && pwd -P) && case "$q" in /*) q=${q%/}$e; [ -n "$q" ] || q=/;; *) q=$r;; esac || q=$r
case "$q" in *'
'*|*//*|*/.|*/./*|*/..|*/../*) q=$r;; esac
echo "real $q"
mo=$(Mi "$q"); [ $? = 2 ] && echo "unchecked awk"; [ -n "$mo" ] && printf '%s\n' "$mo" | while IFS= read -r m; do printf 'mount %s\n' "$m"; done
d=$q; while :; do s=$( { stat -L -c '%d %i' -- "$d" || stat -L -f '%d %i' -- "$d"; } 2>/dev/null) || s=; case "$s" in *[!0-9\ ]*|'') s=;; esac
if [ -z "$s" ] && [ -e "$d" ]; then s=$(ls -dLi -- "$d" 2>/dev/null) || s=; s=${s#"${s%%[! ]*}"}; s=${s%%[ ]*}; case "$s" in *[!0-9]*|'') s='? ?';; *) s="- $s";; esac; fi
echo "id ${s:-- -}"; [ "$d" = / ] && break; d=${d%/*}; [ -n "$d" ] || d=/; done
`

// WorkspaceMarkerScript reports whether the file at path exists in the
// sandbox: it prints "same" when it does, then "end".
func WorkspaceMarkerScript(path string) string {
	return fmt.Sprintf("if [ -e %s ]; then echo same; fi\necho end\n", Quote(path))
}

// WorkspaceProbeScript returns the probe of a workspace sandbox whose work
// tree is remote: its tools, its git version, the commits its repository
// already holds, and the identity of the work tree's directory and of
// those above it (WorkspaceProbe.IDs). ParseWorkspaceProbe reads its
// output.
func WorkspaceProbeScript(remote string) string {
	return fmt.Sprintf(`r=%s
%sfor t in git tar; do if command -v "$t" >/dev/null 2>&1; then echo "tool $t"; fi; done
if command -v git >/dev/null 2>&1; then v=$(git --version 2>/dev/null) && echo "gitversion $v"; fi
if [ -d "$r/.git" ] && [ ! -L "$r/.git" ] && cd "$r" 2>/dev/null; then
%s
export GIT_DIR=.git GIT_WORK_TREE=.
{ g for-each-ref --count=%d --format='%%(objectname)' refs/airlock/base refs/heads; g rev-parse -q --verify 'HEAD^{commit}'; } 2>/dev/null | g cat-file --batch-check='%%(objecttype) %%(objectname)' 2>/dev/null | while read -r t n; do [ "$t" = commit ] && echo "have $n"; done
fi
echo end
`, Quote(remote), mountsFunc+probeIDs, GitPrelude, MaxProbeHave-1)
}

// parseFileID reads "DEV INO" (decimal, no sign, no leading zero), "-
// INO" (the inode alone), "- -" (no directory there) or "? ?" (one that
// could not be identified).
func parseFileID(v string) (FileID, bool) {
	switch v {
	case "- -":
		return FileID{}, true
	case "? ?":
		return FileID{Unknown: true}, true
	}
	d, i, ok := strings.Cut(v, " ")
	if !ok {
		return FileID{}, false
	}
	ino, err := strconv.ParseUint(i, 10, 64)
	if err != nil || strconv.FormatUint(ino, 10) != i { // canonical decimal only, as stat and ls print it
		return FileID{}, false
	}
	if d == "-" {
		return FileID{Ino: ino, OK: true, NoDev: true}, true
	}
	dev, err := strconv.ParseUint(d, 10, 64)
	if err != nil || strconv.FormatUint(dev, 10) != d {
		return FileID{}, false
	}
	return FileID{Dev: dev, Ino: ino, OK: true}, true
}

// ParseWorkspaceProbe reads a workspace probe's output. It accepts only
// the lines the probe writes and requires the final "end" line; anything
// else is a protocol error (ErrProtocol).
func ParseWorkspaceProbe(data []byte) (WorkspaceProbe, error) {
	p := WorkspaceProbe{Tools: map[string]bool{}}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "" || lines[len(lines)-2] != "end" {
		return WorkspaceProbe{}, protocolf("the sandbox probe did not end with its end line")
	}
	for _, l := range lines[:len(lines)-2] {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "tool":
			if v != "git" && v != "tar" {
				return WorkspaceProbe{}, protocolf("the sandbox probe names an unknown tool %q", v)
			}
			p.Tools[v] = true
		case "gitversion":
			if p.GitVersion != "" || len(v) > 200 {
				return WorkspaceProbe{}, protocolf("the sandbox probe has a bad git version line")
			}
			p.GitVersion = v
		case "have":
			if !IsObjectName(v) {
				return WorkspaceProbe{}, protocolf("the sandbox probe lists %q, not an object name", v)
			}
			if len(p.Have) >= MaxProbeHave {
				return WorkspaceProbe{}, protocolf("the sandbox probe lists more than %d commits", MaxProbeHave)
			}
			p.Have = append(p.Have, v)
		case "id":
			id, ok := parseFileID(v)
			if !ok || len(p.IDs) >= MaxProbeIDs {
				return WorkspaceProbe{}, protocolf("the sandbox probe has a bad id line %.80q", l)
			}
			p.IDs = append(p.IDs, id)
		case "unchecked":
			if v != "awk" || p.MountsUnchecked {
				return WorkspaceProbe{}, protocolf("the sandbox probe has a bad unchecked line %.80q", l)
			}
			p.MountsUnchecked = true
		case "mount":
			if v == "" || len(v) > 4096 || strings.ContainsRune(v, 0) || len(p.Mounts) >= MaxMounts {
				return WorkspaceProbe{}, protocolf("the sandbox probe has a bad mount line %.80q", l)
			}
			p.Mounts = append(p.Mounts, unescapeMount(v))
		case "real":
			if p.Real != "" || !path.IsAbs(v) || path.Clean(v) != v || len(v) > 4096 || strings.ContainsRune(v, 0) {
				return WorkspaceProbe{}, protocolf("the sandbox probe has a bad real path line %.80q", l)
			}
			p.Real = v
		default:
			return WorkspaceProbe{}, protocolf("unexpected sandbox probe line %.80q", l)
		}
	}
	return p, nil
}
