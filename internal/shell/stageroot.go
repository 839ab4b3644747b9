package shell

import (
	"fmt"
	"path"
	"strings"
)

// The stage root: the names the stage protocol reserves under it (stage.Dir
// uses them too), and the scripts that make, claim, sweep and delete its
// temporary directories. Each script that works on the root takes the root
// in $r; each that works on one temporary directory takes it in $t.
//
// A temporary directory (TempPrefix + "<asset>-<rand>") holds OwnerFile:
// the process id of the sandbox process that uses it (the tar that writes
// into it, then the publish, cleanup or unstage command that moves it into
// place and deletes what is left). It is no member of the stream. A
// temporary directory never exists without it (MkOwnedScript), and it is
// only ever replaced whole (ClaimScript): a process killed at any point
// leaves an owner file that names it, or a directory whose name does. A
// second line holds the owner's PID namespace (readlink /proc/self/ns/pid)
// where the sandbox shows it: an owner recorded in a PID namespace other
// than the sweeping shell's is one that shell cannot see — an engine that
// gives every exec a namespace of its own (bwrap --unshare-pid), which
// ended with that exec — and counts as gone (its pid, in the sweeper's
// namespace, may well be a live process of the sweeper's own).
const (
	// StageReserved starts every name the protocol keeps under a stage
	// root; no asset name may start with it.
	StageReserved = RuntimeDir
	// ManifestPrefix and ManifestSuffix frame an asset's stored manifest:
	// ManifestPrefix + name + ManifestSuffix (ManifestName).
	ManifestPrefix = StageReserved + "-manifest-"
	ManifestSuffix = ".json"
	// TempPrefix starts the name of a temporary directory.
	TempPrefix = StageReserved + "-tmp-"
	// NewPrefix starts the name a temporary directory has while it is
	// made: NewPrefix + "<pid>-<rand>", pid being the process that makes
	// it (and renames it to its TempPrefix name once its owner file is in
	// it), so that what a process killed in between leaves names its
	// owner.
	NewPrefix = StageReserved + "-new-"
	// GonePrefix starts the names of what a sweep or a deletion has moved
	// out of the way before it deletes it: GonePrefix + "<pid>-<n>", where
	// pid is the sandbox process that moved it (and deletes it).
	GonePrefix = StageReserved + "-gone-"
	// OwnerFile, in a temporary directory, names its owner process.
	OwnerFile = "owner"
	// SweepPrefix starts the name of an asset's sweep marker
	// (SweepMarkerName).
	SweepPrefix = StageReserved + "-sweep-"
	// MaxSweepMarker bounds what the host reads of a sweep marker (only
	// whether it exists matters to it): a marker the protocol writes holds
	// far less (a process id and its PID namespace); a larger one is the
	// sandbox's, and still a marker.
	MaxSweepMarker = 64
)

// ManifestName returns the name of the stored manifest of the asset name.
func ManifestName(name string) string { return ManifestPrefix + name + ManifestSuffix }

// SweepMarkerName returns the name, under the stage root, of the asset
// name's sweep marker: a regular file naming, as an owner file does, the
// publish command that made it (its process id, then its PID namespace).
// A publish puts it in place before its first rename and deletes it as its
// very last step, once it has deleted what it moved aside; a publish
// killed in between (its host cut, the old copy half deleted, the stamps
// half recorded) leaves it behind with what the next sweep must remove;
// one killed between moving the manifest away and putting the new one in
// place leaves the copy without a manifest, and its marker then stays as
// the record of an orphan copy (O in markerFuncs): the asset listing
// names it, so a prune removes it, and a stage of it sends it whole. A
// removal (RemoveScript) puts a marker in place for each asset that has
// none before it moves the asset's manifest away, and deletes it, or a
// dead one it found, once it has moved the asset's copy.
// A probe that reads the manifests without a shell (a FileReader) reads
// the markers too and has the root swept when one exists: a retry that
// finds the killed publish's copy in place, and so publishes nothing,
// still removes what it left. The sweeps delete the markers whose owner
// is gone, after the leftovers (see markerFuncs). It is not one of
// AssetNames: an unstage leaves the marker of a live publish in place. No
// asset name starts with StageReserved, so no asset, manifest, stamps or
// temporary name is a marker's.
func SweepMarkerName(name string) string { return SweepPrefix + name }

// finishAlone starts the publish, cleanup, unstage and sweep scripts: a
// host that dies mid-command closes the command's stdout and stderr, and
// the command must still finish its renames and delete what it moved aside
// (a write to a closed pipe fails instead of killing the shell), so that
// it leaves nothing behind.
const finishAlone = "trap '' PIPE\n"

// mkOwnedScript makes the temporary directory tmp (a sandbox path,
// absolute or relative to the working directory) with its owner file
// naming this shell already in it: the directory is made exclusively as
// NewPrefix + "$$-<rand>" beside tmp, gets its owner file, and is renamed
// to tmp, which must not exist. A shell killed on the way leaves a
// directory whose name holds its pid, which the sweep removes once that
// process is gone (D). It exits 1 when tmp cannot be made.
func mkOwnedScript(tmp string) string {
	dir, base := path.Split(tmp)
	return fmt.Sprintf(`k=%s$$%s; k0=%s
mkdir -m 700 "$k" || exit 1
if ! { { echo $$; readlink /proc/self/ns/pid 2>/dev/null || :; } >"$k/%s" && [ ! -e "$k0" ] && [ ! -L "$k0" ] && mv "$k" "$k0" >/dev/null; }; then
rm -rf "$k" >/dev/null; if [ -e "$k0" ] || [ -L "$k0" ]; then echo "temporary directory $k0 exists already (another process took the name, or the sandbox put it there): stage again" >&2; fi; exit 1; fi
`, Quote(dir+NewPrefix), Quote(base[strings.LastIndexByte(base, '-'):]), Quote(tmp), OwnerFile)
}

// dropScript (with $t the temporary directory tmp) deletes it. It first
// renames it to GonePrefix + "$$-<rand>", since rm deletes the owner file
// long before the rest: a shell killed while deleting leaves a directory
// whose name holds its pid, which D removes once that process is gone.
// When the rename fails, it deletes $t in place. A directory that is not
// writable gets its owner's permissions first; files are never chmodded,
// since a carried file shares its inode with the copy in place. Best
// effort.
//
// With $Zs set (a large tree, see Send.Split), a copy a publish left in
// it ($t/old/NAME or $t/new/tree) is deleted in two rm at once first (Dp),
// each taking every other entry of the copy's top level (at least two, at
// most 512): deleting 38,000 files takes 75-95 ms on tmpfs instead of
// 130-160, with the second processor otherwise idle. That happens only
// when $t's physical path is the stage root's own and $t's name (not a
// directory the sandbox made $t lead to), and Dp enters a copy only when
// its physical path is where it lies in $t: no link is followed, whatever
// the sandbox makes a link meanwhile. What Dp leaves (a directory without
// write permission, say) the one rm deletes.
func dropScript(tmp string) string {
	dir, base := path.Split(tmp)
	return fmt.Sprintf(`g=%s$$%s
if [ -d "$t" ] && [ ! -L "$t" ] && [ ! -e "$g" ] && [ ! -L "$g" ] && mv "$t" "$g" 2>/dev/null; then t=$g; fi
%sif [ -n "$Zs" ] && [ -d "$t" ] && [ ! -L "$t" ] && gr=$(cd -P %s 2>/dev/null && pwd -P) && gq=$(cd -P "$t" 2>/dev/null && pwd -P) && [ "$gq" = "${gr%%/}/${t##*/}" ]; then for gx in "$t"/old/* "$t"/new/tree; do Dp "$gx" "$gq${gx#"$t"}"; done; fi
rm -rf "$t" 2>/dev/null || { find "$t" -type d -exec chmod u+rwx {} +; rm -rf "$t"; } 2>/dev/null
`, Quote(dir+GonePrefix), Quote(base[strings.LastIndexByte(base, '-'):]), dropFuncs, Quote(path.Clean(dir)))
}

// dropFuncs defines Dp DIR PHYSICAL, which deletes the entries of the
// directory DIR (a copy) in two rm at once when DIR is a directory, not
// a link, whose physical path is PHYSICAL, with at least two and at most
// 512 entries; Dx ENTRY... is the rm of one half (see halvesFunc). Best
// effort, silent.
const dropFuncs = halvesFunc + `Dp() { [ -d "$1" ] && [ ! -L "$1" ] || return 0
(cd -P "$1" && [ "$(pwd -P)" = "$2" ] || exit 0; set -- ./* ./.[!.]* ./..?*; [ $# -ge 4 ] && [ $# -le 512 ] || exit 0
(Hv 1 Dx "$@") & dp=$!; (Hv 0 Dx "$@"); wait "$dp") >/dev/null 2>&1; }
Dx() { exec rm -rf -- "$@"; }
`

// claimScript (with $t the temporary directory) makes this shell its
// owner: the owner file is replaced in one rename, so that a shell killed
// meanwhile leaves the previous owner's (gone too), never an empty one.
const claimScript = `{ { echo $$; readlink /proc/self/ns/pid 2>/dev/null || :; } >"$t/` + OwnerFile + `.new" && mv -f "$t/` + OwnerFile + `.new" "$t/` + OwnerFile + `" >/dev/null; }`

// sweepFuncs defines the shell functions of the sweep, with $r the root.
//
// F FILE succeeds when the owner file FILE records a PID namespace other
// than this shell's (both known): its owner is one this shell cannot see.
//
// L PID succeeds when PID is a live process: on Linux, one whose
// /proc/PID/stat state is not Z (zombie) or X (dead), since kill -0
// succeeds on a zombie and a sandbox whose PID 1 never reaps keeps its
// zombies forever; elsewhere kill -0 (a refusal, EPERM, counts as alive)
// and ps's state, when ps answers.
//
// G sets $g to a fresh GonePrefix name of this shell.
//
// D deletes every GonePrefix entry of this shell or of a process that is
// gone: what an earlier sweep (of this command, or of one killed before it
// finished) moved out of the way; and every NewPrefix entry of a process
// that is gone (not this shell): a temporary directory whose maker was
// killed before it renamed it (mkOwnedScript). Best effort: a failure
// never fails the command, and what stays is the next sweep's.
const sweepFuncs = `__ns=$(readlink /proc/self/ns/pid 2>/dev/null)
F() { __n=; { read -r __x; read -r __n; } <"$1" 2>/dev/null; [ -n "$__n" ] && [ -n "$__ns" ] && [ "$__n" != "$__ns" ]; }
L() { if [ -d /proc/self ] && [ -e "/proc/$1" ]; then
__s=; read -r __s <"/proc/$1/stat" 2>/dev/null || return 0
__s=${__s##*) }
case "$__s" in Z*|X*) return 1;; esac
return 0
fi
if [ -d /proc/self ]; then kill -0 "$1" 2>/dev/null; return; fi
if ! kill -0 "$1" 2>/dev/null; then case "$(kill -0 "$1" 2>&1)" in *ermi*) return 0;; esac; return 1; fi
case "$(ps -o stat= -p "$1" 2>/dev/null)" in Z*) return 1;; esac
return 0
}
G() { __i=0; g="$r/` + GonePrefix + `$$-0"; while [ -e "$g" ] || [ -L "$g" ]; do __i=$((__i+1)); g="$r/` + GonePrefix + `$$-$__i"; done; }
D() { for __g in "$r"/` + GonePrefix + `* "$r"/` + NewPrefix + `*; do
[ -d "$__g" ] && [ ! -L "$__g" ] || continue
case "${__g##*/}" in ` + GonePrefix + `*) __p=${__g##*/` + GonePrefix + `}; __o=1;; *) __p=${__g##*/` + NewPrefix + `}; __o=;; esac
__p=${__p%%-*}
case "$__p" in ''|*[!0-9]*) continue;; esac
if [ "$__p" = "$$" ]; then [ -n "$__o" ] || continue; elif L "$__p"; then continue; fi
rm -rf "$__g" 2>/dev/null || { find "$__g" -type d -exec chmod u+rwx {} +; rm -rf "$__g"; } 2>/dev/null
done; }
` + markerFuncs

// markerFuncs defines the shell functions that handle the sweep markers
// (SweepMarkerName) under $r, after sweepFuncs.
//
// N MARKER succeeds when the marker is no live process's: anything but a
// regular file (none of the protocol's), or one that names no process, a
// process of another PID namespace (as F), or a process that is gone (L),
// this shell being alive. It reads at most 64 bytes of it (dd: a huge
// file costs nothing; without dd, head -c; a sandbox with neither has
// every marker read as gone)
// and sets $__p to the process id read, "" for none.
//
// O NAME succeeds when NAME is an orphan copy: something at NAME under $r
// and no manifest beside it. A sweep marker beside an orphan copy is its
// record, whatever the marker's owner: A leaves it (so E never deletes
// it), leftoverCheck does not count it, AssetsScript lists the asset
// (unless the owner is alive: a publish between its copy and its
// manifest). The
// copy itself is never touched by a sweep: the marker's owner may be a
// live publish that this sweep cannot see (another PID namespace), between
// putting its copy in place and its manifest.
//
// A notes in $__m the markers that are no live process's and no orphan
// copy's (O), each as "PID/NAME" on a line of its own (no asset name holds
// a slash or a newline): a sweep deletes them once it has removed their
// leftovers (E), so that one killed before then leaves them for the next.
// Its caller runs it before the sweep's renames: a process that dies later
// left leftovers the sweep may not have seen, and its marker stays.
//
// E deletes the markers A noted whose owner is still the one A read: a
// marker a publish put in place meanwhile stays.
const markerFuncs = `__nl='
'
O() { { [ -e "$r/$1" ] || [ -L "$r/$1" ]; } && [ ! -e "$r/` + ManifestPrefix + `$1` + ManifestSuffix + `" ] && [ ! -L "$r/` + ManifestPrefix + `$1` + ManifestSuffix + `" ]; }
N() { __p=; [ -f "$1" ] && [ ! -L "$1" ] || return 0
__x=$(dd if="$1" bs=64 count=1 2>/dev/null) || __x=$(head -c 64 -- "$1" 2>/dev/null) || __x=
__p=${__x%%"$__nl"*}; __n=
case "$__x" in *"$__nl"*) __n=${__x#*"$__nl"}; __n=${__n%%"$__nl"*};; esac
case "$__p" in ''|*[!0-9]*) __p=; return 0;; esac
[ -n "$__n" ] && [ -n "$__ns" ] && [ "$__n" != "$__ns" ] && return 0
[ "$__p" != "$$" ] && ! L "$__p"; }
A() { __m=; for __k in "$r"/` + SweepPrefix + `*; do
[ -e "$__k" ] || [ -L "$__k" ] || continue
N "$__k" && ! O "${__k##*/` + SweepPrefix + `}" && __m="$__m$__p/${__k##*/}$__nl"
done; }
E() { [ -n "$__m" ] || return 0; __f=$IFS; IFS=$__nl; set -f
for __e in $__m; do __k="$r/${__e#*/}"
N "$__k" || continue; [ "$__p" = "${__e%%/*}" ] || continue
rm -rf "$__k" 2>/dev/null || { find "$__k" -type d -exec chmod u+rwx {} +; rm -rf "$__k"; } 2>/dev/null
done; set +f; IFS=$__f; __m=; }
`

// Skip is what a sweep leaves alone under a root: the temporary directories
// its host still uses (between a transfer and its publish no sandbox
// process owns them).
type Skip struct {
	// Names are the temporary directories in use when the script was made.
	Names []string
	// Tag and Seq: the host names its temporary directories <...>-<Tag><n>,
	// n counting up from 1; one with n > Seq was named after Names was read
	// and is in use too (the script may run after that directory was made
	// and its transfer ended). Tag is lower-case hex; "" for none.
	Tag string
	Seq uint64
}

// skipCase writes a case statement that skips the loop's iteration when
// word (a quoted sh word) is one of skip's temporary directories; nothing
// when skip is empty.
func skipCase(sb *strings.Builder, word string, skip Skip) {
	if len(skip.Names) == 0 && skip.Tag == "" {
		return
	}
	if strings.Trim(skip.Tag, "0123456789abcdef") != "" {
		panic("shell: Skip.Tag is not lower-case hex: " + skip.Tag)
	}
	sb.WriteString("case " + word + " in ")
	for i, n := range skip.Names {
		if i > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString(Quote(n))
	}
	if len(skip.Names) > 0 {
		sb.WriteString(") continue;;")
	}
	if skip.Tag != "" {
		fmt.Fprintf(sb, ` *-%[1]s[0-9]*) q=%[2]s; q=${q##*-%[1]s}
case "$q" in *[!0-9]*) ;; *) [ "$q" -gt %[3]d ] 2>/dev/null && continue;; esac;;`, skip.Tag, word, skip.Seq)
	}
	sb.WriteString(" esac\n")
}

// sweepScript (with $r the root, after sweepFuncs) moves out of the way
// the temporary directories whose owner process is gone (dead or a zombie):
// those of cut transfers, of hosts killed between the transfer and the
// publish, and of publishes and unstages killed before they deleted what
// they had moved aside. D deletes them afterwards, outside the control
// deadline. A directory without an owner file (none of the protocol's:
// they are made with theirs, see mkOwnedScript), one whose owner is
// alive, and one the host still uses (between its transfer and its
// publish no sandbox process owns it; the names in skip) are left alone.
// Each directory is renamed in one step, and put back when its owner file
// changed meanwhile (a publish that claimed it races the sweep), so a
// publish either moved the whole new tree first or finds it gone and
// fails (retryably, RenameExit); it never publishes part of one. The check relies on the
// sandbox's process ids: a root shared between machines (or PID
// namespaces), or with another host process that stages into it at the
// same instant, can lose a transfer's directory, which fails that
// transfer, never its sandbox's copy. Best effort: a failure here never
// fails the command.
func sweepScript(skip Skip) string {
	var sb strings.Builder
	sb.WriteString(`for s in "$r"/` + TempPrefix + `*; do
[ -d "$s" ] && [ ! -L "$s" ] && [ -f "$s/` + OwnerFile + `" ] && [ ! -L "$s/` + OwnerFile + `" ] || continue
`)
	skipCase(&sb, `"${s##*/}"`, skip)
	sb.WriteString(`p=; read -r p <"$s/` + OwnerFile + `" 2>/dev/null
case "$p" in ''|*[!0-9]*) continue;; esac
if ! F "$s/` + OwnerFile + `" && { [ "$p" = "$$" ] || L "$p"; }; then continue; fi
G; mv "$s" "$g" 2>/dev/null || continue
o=; read -r o <"$g/` + OwnerFile + `" 2>/dev/null
if [ "$o" != "$p" ]; then mv "$g" "$s" 2>/dev/null; fi
done
`)
	return sb.String()
}

// leftoverCheck (after sweepFuncs, in the root) prints LeftoversLine when
// a sweep would remove something: a temporary directory whose owner is
// gone (none of skip), a GonePrefix or NewPrefix entry whose process is
// gone, or a sweep marker that is no live process's (N) and no orphan
// copy's record (O).
func leftoverCheck(skip Skip) string {
	var sb strings.Builder
	sb.WriteString(`w=
for s in ` + TempPrefix + `* ` + GonePrefix + `* ` + NewPrefix + `* ` + SweepPrefix + `*; do
case "$s" in ` + SweepPrefix + `*) if { [ -e "$s" ] || [ -L "$s" ]; } && N "$s" && ! O "${s#` + SweepPrefix + `}"; then w=1; break; fi; continue;; esac
[ -d "$s" ] && [ ! -L "$s" ] || continue
case "$s" in
` + GonePrefix + `*) p=${s#` + GonePrefix + `}; p=${p%%-*};;
` + NewPrefix + `*) p=${s#` + NewPrefix + `}; p=${p%%-*};;
*) [ -f "$s/` + OwnerFile + `" ] && [ ! -L "$s/` + OwnerFile + `" ] || continue
`)
	skipCase(&sb, `"$s"`, skip)
	sb.WriteString(`p=; read -r p <"$s/` + OwnerFile + `" 2>/dev/null; F "$s/` + OwnerFile + `" && { w=1; break; };;
esac
case "$p" in ''|*[!0-9]*) continue;; esac
if ! L "$p"; then w=1; break; fi
done
[ -z "$w" ] || echo ` + LeftoversLine + `
`)
	return sb.String()
}

// enterRoot sets $r to root and changes into it; a root that is a link
// (never followed: nothing is staged there) or missing ends the script
// with status 0.
func enterRoot(sb *strings.Builder, root string) {
	fmt.Fprintf(sb, "r=%s\n[ -L \"$r\" ] && exit 0\ncd \"$r\" 2>/dev/null || exit 0\n", Quote(root))
}

// ProbeScript is the probe command of the stage root root (see ReadProbe
// for its reply): the probe header (with the capability word when detect
// is set, else "-"), LeftoversLine when a sweep would remove something
// (none of the temporary directories named in skip, which the host still
// uses), and a tar of the manifests (ManifestName, relative to the root)
// of the assets names that exist as readable regular files beside their
// copy's directory (not a link): an unreadable one (the sandbox's chmod
// 000) is none, and a manifest whose copy is gone (an agent deleted
// the directory or put a link there, a removal took it while a publish put
// the manifest in place) is not sent, so that the asset is published again
// rather than taken as staged.
// A root that is a link or missing sends the header alone.
func ProbeScript(root string, detect bool, skip Skip, names []string) string {
	var sb strings.Builder
	if detect {
		sb.WriteString(DetectScript)
	} else {
		sb.WriteString("c=-\n")
	}
	sb.WriteString(EchoHeader)
	enterRoot(&sb, root)
	// Leftovers a sweep would remove are reported, so that a stage with
	// nothing to publish still removes them (SweepRootScript).
	sb.WriteString(sweepFuncs)
	sb.WriteString(leftoverCheck(skip))
	sb.WriteString("set --\n")
	for _, n := range names {
		// ./NAME: a name may start with a dash.
		fmt.Fprintf(&sb, "f=%[1]s; if [ -f \"$f\" ] && [ ! -L \"$f\" ] && [ -r \"$f\" ] && [ -d %[2]s ] && [ ! -L %[2]s ]; then set -- \"$@\" \"$f\"; fi\n", Quote(ManifestName(n)), Quote("./"+n))
	}
	sb.WriteString("[ $# -eq 0 ] || exec tar -c -f - \"$@\"")
	return sb.String()
}

// SweepRootScript sweeps the stage root root as a command of its own
// (sweepScript, leaving the temporary directories in skip alone): it
// notes the sweep markers that are no live process's (A), prints
// PublishedLine once its renames are done, then deletes what it moved
// away, and those markers last (E). A root that is a link or missing is
// left alone.
func SweepRootScript(root string, skip Skip) string {
	var sb strings.Builder
	sb.WriteString(finishAlone)
	enterRoot(&sb, root)
	sb.WriteString(sweepFuncs)
	sb.WriteString("A\n")
	sb.WriteString(sweepScript(skip))
	sb.WriteString("echo " + PublishedLine + "\nD\nE\nexit 0\n")
	return sb.String()
}
