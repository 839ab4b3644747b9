package shell

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// The publish of one asset over a shell target runs two sandbox commands:
// the send command (SendScript: setup, carry, transfer), whose report
// Report parses, and the publish (PublishScript), which prints
// PublishedLine once its renames are done; where the sandbox's tar stops
// at the end of its archive (Caps.Records), the send command publishes
// itself once the host writes PublishLine on its stdin (Send.Publish), and
// the publish is no command of its own. A failed publish's temporary
// directory is removed by CleanupScript. A carry too long to travel in the
// send command's script is a command of its own (CarryScript).

// Send is what a send command does.
type Send struct {
	Root string // the stage root
	Tmp  string // the temporary directory to make, under Root
	Dst  string // the asset's current copy, the source of the carry
	// Detect: the sandbox's tools are not known yet; the command learns
	// them first (DetectScript, the probe header) and refuses, exit 97,
	// before changing anything when one is missing.
	Detect bool
	// Hash: the sandbox's tools are known and it can hash (carry). Ignored
	// with Detect, which learns it.
	Hash bool
	// Skip: the temporary directories under Root the host still uses
	// (between a transfer and its publish), which the sweep leaves alone.
	Skip Skip
	// Carry, when not nil, is carried in the command's own script.
	Carry *CarryPlan
	// PlanIn, when not nil, is a carry plan that arrives on stdin, before
	// the stream, as an archive of its own (WritePlan), where the
	// sandbox's tar stops at its archive's end (Caps.Records; with Detect,
	// where the detection finds it does): the command extracts it and
	// carries it. Elsewhere Carry, when not nil, is carried from the
	// script.
	PlanIn *CarryPlan
	// Publish, when not nil, has the command publish in its own session
	// (only for a sandbox whose tar stops at the end of its archive,
	// Caps.Records; the host pads the stream to whole TarRecord records):
	// after the extraction it prints ExtractedLine and reads one line from
	// stdin; PublishLine runs Publish's PublishScript, anything else
	// (the host's end of stdin: a cancelled or cut host) ends the command
	// with the temporary directory left for the cleanup or the next sweep.
	Publish *Publish
	// Split says the tree is large (SplitFiles regular files or more, a
	// few hundred top-level entries at most): the publish lists the new
	// copy's stamps, and deletes the old copy, in two processes at once
	// (see stampFuncs and dropScript).
	Split bool
}

// SplitFiles is the number of regular files from which a tree's stamps
// are listed, and its old copy deleted, in two processes at once: below
// it, the processes cost more than they save.
const SplitFiles = 2000

// splitVar sets Zs, which has Z (Zp) and dropScript (Dp) use two
// processes.
const splitVar = "Zs=1\n"

// Publish is the publish a send command runs in its own session: the
// arguments of PublishScript besides the temporary directory and Dst.
type Publish struct {
	Manifest, Name string
	Exchange       bool
	Guard          []FileID
}

// SourceExit is the exit status of a publish (PublishScript) that found,
// at the copy's place, a directory its guard names (the host's Source, or
// a directory above it, in a sandbox that shares the host's file system),
// or of a removal (RemoveScript) that found one of its guard's at an
// asset's place: it moved nothing.
const SourceExit = 95

// guardScript (with $d the copy's place, below the stage root) ends the
// publish with SourceExit, saying so, when $d is a directory (not a link)
// whose device and inode (stat -L) are one of ids (the Source, then the
// directories above it), or when ids[0] is the root's or a directory's
// above it, its physical path (cd -P): the copy would be made inside the
// Source, from which it was read. "" without ids.
func guardScript(ids []FileID) string {
	pats := idPatterns(ids)
	if len(pats) == 0 || !ids[0].OK {
		return ""
	}
	return statIDFunc + fmt.Sprintf(`if [ -d "$d" ] && [ ! -L "$d" ]; then gi=$(G "$d") || U "$d"; case " $gi " in %[1]s) echo "$d is the host's source directory, or a directory above it (the sandbox shares the host's file system): publishing would delete it; stage into another root or under another name" >&2; exit %[2]d;; esac; fi
if gq=$(cd -P -- "${d%%/*}/" 2>/dev/null && pwd -P); then set --; while :; do set -- "$@" "$gq"; [ "$gq" = / ] && break; gq=${gq%%/*}; [ -n "$gq" ] || gq=/; done
gl=$(G "$@") || U "${d%%/*}"; printf '%%s\n' "$gl" | while IFS= read -r gi; do case " $gi " in %[3]s) echo "the stage root ${d%%/*} is inside the host's source directory (the sandbox shares the host's file system): the copy would hold itself; stage into another root" >&2; exit %[2]d;; esac; done || exit %[2]d; set --; fi
`, strings.Join(pats, "|"), SourceExit, pats[0])
}

// UncheckedIDsExit is the exit status of a publish (PublishScript) or a
// removal (RemoveScript) whose sandbox can tell the identity of a
// directory neither by stat nor by ls: it cannot check that what it would
// delete is not the host's Source (U), and moved nothing.
const UncheckedIDsExit = 92

// statIDFunc defines G, which prints the device and inode ("DEV INO") of
// each file it is given, following links (GNU and BusyBox stat, then
// BSD's), or where the sandbox has no stat, the inode alone ("? INO", ls
// -i), and fails when it can print neither; and U DIR, which ends the
// script with UncheckedIDsExit, saying so, or with RenameExit when DIR is
// gone (another connection's stage or unstage moved it between the check
// and G: a race, which staging again clears, not a missing tool).
var statIDFunc = fmt.Sprintf(`G() { { stat -L -c '%%d %%i' -- "$@" || stat -L -f '%%d %%i' -- "$@"; } 2>/dev/null && return 0; gl=$(ls -dLi -- "$@" 2>/dev/null) && [ -n "$gl" ] || return 1; printf '%%s\n' "$gl" | while read -r gi gr; do echo "? $gi"; done; }
U() { if [ ! -e "$1" ] && [ ! -L "$1" ]; then echo "$1 went away while its identity was checked (a stage or unstage of it through another connection at that moment): nothing was moved" >&2; exit %d; fi; echo "the sandbox has neither stat nor ls to tell the identity of $1: it cannot check that it is not the host's source directory (a sandbox that shares the host's file system); nothing was moved: install stat (coreutils or BusyBox) in the sandbox" >&2; exit %d; }
`, RenameExit, UncheckedIDsExit)

// idPatterns returns, for each known id, the case pattern of its lines
// from G: ' DEV INO ', or ' ? INO ' (the inode alone, from ls: a match
// may be another file system's directory of the same number, and the
// publish is refused though it would delete nothing of the host's; only
// in a sandbox without stat).
func idPatterns(ids []FileID) []string {
	var pats []string
	for _, id := range ids {
		if id.OK {
			pats = append(pats, fmt.Sprintf("' %d %d '|' ? %d '", id.Dev, id.Ino, id.Ino))
		}
	}
	return pats
}

// NoPublishExit is the exit status of a send command that publishes
// (Send.Publish) whose stdin ended, or held something else, where the
// publish line was due: it moved nothing.
const NoPublishExit = 96

// RenameExit is the exit status of a publish (PublishScript) or a removal
// (RemoveScript) whose renames failed: a copy, manifest or stamps file it
// was moving went away or came back meanwhile (most often another process
// published or removed the asset at that moment), the copy is in use, or
// the publish's temporary directory is gone (another connection's sweep
// took it before the publish claimed it; see sweptFunc).
const RenameExit = 4

// DetectMissingExit is the exit status of a send command whose sandbox
// lacks a tool the protocol needs (the probe header names them).
const DetectMissingExit = 97

// SendScript is the send command: it makes the root (a link or
// non-directory there is replaced, never followed), sweeps it, makes the
// temporary directory with its owner file and prints ReadyLine; then
// deletes what the sweep moved away (outside the control deadline),
// carries the unchanged files when the plan is embedded, prints
// CarriedLine and extracts the stream from stdin into the temporary
// directory.
func SendScript(s Send) string {
	var sb strings.Builder
	if s.Detect {
		fmt.Fprintf(&sb, "%s%scase \"$c\" in *' '*) exit %d;; esac\nah=$s\n", DetectScript, EchoHeader, DetectMissingExit)
	} else if s.Hash {
		sb.WriteString("ah=1\n") // the sandbox can hash: carry
	}
	sb.WriteString("umask 022\n")
	if s.Split {
		sb.WriteString(splitVar)
	}
	if parent := path.Dir(s.Root); parent != "/" {
		fmt.Fprintf(&sb, "p=%s\n[ -d \"$p\" ] || mkdir -p \"$p\" || exit 1\n", Quote(parent))
	}
	fmt.Fprintf(&sb, "r=%s\nif [ -L \"$r\" ] || { [ -e \"$r\" ] && [ ! -d \"$r\" ]; }; then rm -f \"$r\" || exit 1; fi\n", Quote(s.Root))
	sb.WriteString("[ -d \"$r\" ] || mkdir \"$r\" 2>/dev/null || [ -d \"$r\" ] || exit 1\n") // another stage may make it meanwhile
	sb.WriteString(sweepFuncs)
	sb.WriteString("A\n")
	sb.WriteString(sweepScript(s.Skip))
	// The owner file names the process that writes into tmp (this shell,
	// then tar through exec), so that a later setup can tell a cut
	// transfer's directory from a live one (sweepScript); tmp never exists
	// without it (mkOwnedScript).
	sb.WriteString(mkOwnedScript(s.Tmp))
	fmt.Fprintf(&sb, "echo %s\numask 0\n", ReadyLine)
	// What the sweep moved away is deleted now, outside the control
	// deadline (a data step, bounded by the caller's context).
	sb.WriteString("D\nE\n")
	embedded := s.Carry != nil && len(s.Carry.Want) > 0
	switch {
	case s.PlanIn != nil && s.Detect:
		sb.WriteString("if [ \"$__tr\" = 1 ]; then\n")
		writePlanIn(&sb, s.Tmp, s.Dst, s.PlanIn)
		if embedded {
			sb.WriteString("else\n")
			s.Carry.write(&sb, s.Tmp, s.Dst, "")
		}
		sb.WriteString("fi\n")
	case s.PlanIn != nil:
		writePlanIn(&sb, s.Tmp, s.Dst, s.PlanIn)
	case embedded:
		s.Carry.write(&sb, s.Tmp, s.Dst, "")
	}
	fmt.Fprintf(&sb, "echo %s\ncd %s || exit 1\n", CarriedLine, Quote(s.Tmp))
	if p := s.Publish; p != nil {
		if s.Detect {
			sb.WriteString("if [ \"$__tr\" = 1 ]; then\n") // only where tar stops at its archive's end
		}
		fmt.Fprintf(&sb, "tar -x -o -m -f - >&2 || exit\ncd \"$r\" || exit 1\necho %s\nIFS= read -r l || exit %d\n[ \"$l\" = %s ] || exit %d\n", ExtractedLine, NoPublishExit, PublishLine, NoPublishExit)
		sb.WriteString(PublishScript(s.Tmp, s.Dst, p.Manifest, p.Name, p.Exchange, s.Split, p.Guard))
		if !s.Detect {
			return sb.String()
		}
		sb.WriteString("\nfi\n")
	}
	sb.WriteString("exec tar -x -o -f - >&2\n")
	return sb.String()
}

// CarryFile is a file to carry from the previous copy: its path (relative
// to the copy's top), its mode and the SHA-256 the manifest gives it.
type CarryFile struct {
	Path   string
	Mode   fs.FileMode
	Size   int64  // the manifest's: a copy of another size is not carried
	SHA256 string // lowercase hex
}

// CarryPlan is the carry part of a publish: the files to carry from the
// previous copy, one "MODE SIZE PATH" line each (the carry script's input),
// sorted by mode, and the hash each must have.
type CarryPlan struct {
	lines []string          // "644 10 a/b"
	Want  map[string]string // path → lowercase hex SHA-256: what Report accepts
	Size  int               // bytes of the lines in a script
	// Manifest is the lowercase hex SHA-256 of the manifest the plan was
	// made from (the one the host probed). The sandbox vouches for files by
	// their stamps only while its manifest is still that one: a publish in
	// between (another stage of the asset) leaves a copy the plan does not
	// describe, and every file is then copied and hashed. "" vouches for
	// none.
	Manifest string
}

// PlanCarry plans carrying files. Files whose names the hash tools would
// print escaped are left out (sent). A name that starts with "-" is
// copied and hashed as "./NAME", which no tool reads as an option; the
// report's "./" is dropped (Report).
func PlanCarry(files []CarryFile) CarryPlan {
	p := CarryPlan{Want: make(map[string]string, len(files))}
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b CarryFile) int { return cmp.Compare(a.Mode.Perm(), b.Mode.Perm()) })
	for _, f := range files {
		if strings.ContainsAny(f.Path, "\\\n\r") {
			continue
		}
		l := fmt.Sprintf("%o %d %s", f.Mode.Perm(), f.Size, f.Path)
		p.lines = append(p.lines, l)
		p.Size += len(l) + 1
		p.Want[f.Path] = f.SHA256
	}
	return p
}

// StampsName returns the name, under the stage root, of the stamps of the
// asset name's copy: one line per regular file of the copy (but those
// whose path holds a newline), its inode, size, modification and change
// times and ./PATH (see stampFuncs), recorded by the publish once the copy
// is in place and the old one deleted. A file whose stamp (and mode) are
// the same at the next publish is vouched for by them: it is carried as a
// hard link, unread. The stamps are the
// sandbox's own record of its own copy, as trustworthy as the hashes it
// reports: a sandbox can always lie about its copy (the staged copy is no
// boundary against the sandbox that holds it).
func StampsName(name string) string { return StageReserved + "-stamps-" + name }

// AssetNames are the names the asset name holds under the stage root, in
// the order an unstage moves them aside: its manifest, its stamps and the
// file they are written to first (recordStamps: a publish killed while
// writing it leaves it), and its copy.
func AssetNames(name string) []string {
	return []string{ManifestName(name), StampsName(name), StampsName(name) + ".new", name}
}

// LinkedLine starts a line of a carry's report that names a file carried
// as a hard link, vouched for by its stamps.
const LinkedLine = "airlock-linked "

// stampFuncs defines Y, the inode and path of each regular file under the
// working directory, and Z [MODE-FORMATS]: the stamps of the regular files
// under the working directory, one line each: inode, size, modification
// and change times to the nanosecond, the mode when asked, then the path
// (./…). It takes them with GNU find's -printf where the sandbox has it
// (F=5: four fields, then the mode), else with stat (GNU or BusyBox;
// F=9: %y and %z are three fields each). $1 and $2 are what stands before
// the path: " " to record, " %m " and " %a " to have the mode too. A
// sandbox that changes its tools between two publishes vouches for
// nothing at the second: the lines differ. Names holding a newline, which
// no line can carry, are left out (their directories' too): a listing
// that held one would show a line of its own for every newline, and a
// name such as "-n<LF>x" would list a second ./-n with another file's
// stamp (such a file is never linked: T takes it out of the new tree).
//
// With -printf, $Zs set (a large tree: Send.Split, or a carry of
// SplitFiles files or more) and $Zt naming a file outside the working
// directory, Z lists in two finds at once (Zp), each taking every other
// entry of the working directory (at most 512 of them, else one find): the
// listing is a stat of every file, and the second processor is idle
// meanwhile (a 38,000-file copy on tmpfs: 50-65 ms instead of 90-110). The
// lines are the same; their order, which nothing reads, is not. Zx ENTRY...
// is the find of one half (see halvesFunc).
const stampFuncs = halvesFunc + `Y() { if find . -maxdepth 0 -printf '' >/dev/null 2>&1; then find . -type f -printf '%i %p\n'; else find . -type f -exec stat -c '%i %n' {} +; fi; }
Z() { if find . -maxdepth 0 -printf '' >/dev/null 2>&1; then F=5; Zf="%i %s %T@ %C@${1:- }%p\n"; Zp; else F=9; find . -name '*
*' -prune -o -type f -exec stat -c "%i %s %y %z${2:- }%n" {} +; fi; }
Zp() { set --; [ -z "$Zs" ] || [ -z "$Zt" ] || set -- ./* ./.[!.]* ./..?*
if [ $# -lt 4 ] || [ $# -gt 512 ]; then find . -name '*
*' -prune -o -type f -printf "$Zf"; return; fi
(Hv 1 Zx "$@") >"$Zt" & zp=$!
(Hv 0 Zx "$@") || { wait "$zp"; return 1; }
wait "$zp" && cat -- "$Zt"; }
Zx() { exec find "$@" -name '*
*' -prune -o -type f -printf "$Zf"; }
`

// halvesFunc defines Hv PARITY FUNC ENTRY..., which runs FUNC with every
// other ENTRY that exists (the first, third… for PARITY 1; the second,
// fourth… for 0), or nothing when none does: half of a tree's top-level
// entries, for one of two processes that share its work (see stampFuncs
// and dropFuncs). FUNC execs: Hv runs in a subshell of its own.
const halvesFunc = `Hv() { hv=$1; hf=$2; shift 2; hi=0; for hx; do shift; hi=$((hi + 1)); if [ "$((hi % 2))" = "$hv" ] && { [ -e "$hx" ] || [ -L "$hx" ]; }; then set -- "$@" "$hx"; fi; done
[ $# = 0 ] || "$hf" "$@"; }
`

// carryFuncs defines the carry's shell functions, with $n the new tree.
//
// H hashes its arguments (openssl when the sandbox has it, which is
// several times faster than most sha256sum builds, else sha256sum; both
// print "<hex> <flag><path>").
//
// C MODE NAMES... copies NAMES from the previous copy (the working
// directory) into $n with tar, drops whatever arrived that is not a
// regular file, sets the manifest's MODE and hashes the rest. Errors are
// not fatal: a file whose hash is not reported is sent.
//
// K STAMPS MANIFEST DIGEST reads the plan ("MODE SIZE PATH" lines,
// sorted by mode) on stdin. The previous copy's files are listed (Z) in
// every case: a file the listing shows at another size than the plan's is
// never copied or hashed but sent (a copy the sandbox grew, a sparse
// file of terabytes, costs nothing). Only while MANIFEST's SHA-256 is DIGEST (the manifest the
// plan was made from; checked after STAMPS is read and the previous copy
// entered, so that all three are of one publish), a file whose stamp and
// mode are what STAMPS recorded at the last publish is vouched for: the
// previous copy is linked whole into $n (cp -al: new directories, the
// files hard links), then whatever is not a vouched file
// is taken out of it (files that changed or left, anything that is not a
// regular file, directories left empty; the stream brings back the
// host's; names holding a newline, which no listing can carry, go
// first). Then the new tree's regular files are listed: each vouched file
// there as the inode its stamp named is reported on a LinkedLine, every
// other file is taken out (one replaced meanwhile is then sent). T takes
// out what is not a regular file or a directory and the names holding a
// newline, and lists the regular files (inode and path) into $n.f: in one
// walk where find has -printf, else in three. The others
// are carried by C, batched by mode. When any of that fails (no cp -al,
// find or stat %y here, say), $n is made anew and every file goes through
// C, as are all of them when fewer than half the files of the previous
// copy are vouched for (linking it whole would cost more than copying
// those). Without awk nothing is carried: every file is sent. The link
// starts, in the background, as soon as the stamps are listed, when the
// plan names at least half as many files as the listing (only then can
// half be vouched for): it runs while awk matches stamps and plan, and U
// deletes it (j its job) when awk decides against it. K waits for it in
// every case, so no process outlives the command. W makes $n anew; the
// link holds the previous copy's directory modes, so a directory without
// write permission gets its owner's first (files are never chmodded: they
// are the previous copy's).
const carryFuncs = `H() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; else sha256sum -- "$@"; fi; }
C() { m=$1; shift
tar -c -f - -- "$@" 2>/dev/null | (cd "$n" && tar -x -o -f - 2>/dev/null)
(cd "$n" && for f; do if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then rm -rf -- "$f"; fi; done; chmod "$m" -- "$@"; H "$@") 2>/dev/null; }
P='BEGIN { L = ENVIRON["L"]; R = ENVIRON["R"]; N = ENVIRON["N"] }
function put(m, f) { if (w && (c != m || w > B)) { print "" > R; w = 0 }
if (!w) { printf "C %s", m > R; c = m; w = 1 }; printf " \047%s\047", f > R; w += length(f) + 3 }
FILENAME == ARGV[1] { r[$0]; next }
FILENAME == ARGV[2] { o = F; for (i = 1; i <= F; i++) o += length($i); nc++; p = substr($0, o + 1); z[p] = $2; if ((substr($0, 1, o - length($F) - 1) p) in r) { d[p] = $F; e[p] = $1 }; next }
{ f = substr($0, length($1) + length($2) + 3); q = "./" f; ok = (q in d) && d[q] == $1; if (ok) { print e[q] " " f > L; nl++ }
if (!ok && (!(q in z) || z[q] == $2)) { if (index(f, "\047")) gsub(/\047/, "\047\"\047\"\047", f); if (f ~ /^-/) f = "./" f; put($1, f) } }
END { printf "" > L; if (w) print "" > R; else printf "" > R; print (nl && 2 * nl >= nc) ? "link" : "copy" > N }'
Q() { L="$n.l" R="$n.r" N="$n.n" awk -v B=` + carryBatch + ` -v F="$F" "$P" "$@" "$n.p" 2>/dev/null; }
V() { X="$n.x" awk 'BEGIN { X = ENVIRON["X"] } FILENAME == ARGV[1] { h["./" substr($0, length($1) + 2)] = $1; next }
{ p = substr($0, length($1) + 2); if (h[p] == $1) { print "` + LinkedLine + `" substr(p, 3); h[p] = "" } else print p > X }
END { printf "" > X }' "$n.l" "$n.f"; }
T() { if find . -maxdepth 0 -printf '' >/dev/null 2>&1; then find . -name '*
*' -prune -exec rm -rf {} + -o ! -type f ! -type d -exec rm -f {} + -o -type f -printf '%i %p\n' >"$n.f"
else find . ! -type f ! -type d -exec rm -f {} + && find . -depth -name '*
*' -exec rm -rf {} + && Y >"$n.f"; fi; }
W() { { rm -rf "$n" || { find "$n" -type d -exec chmod u+rwx {} +; rm -rf "$n"; }; } >/dev/null 2>&1 && mkdir -p "$n" >/dev/null 2>&1; }
U() { [ -z "$j" ] || W; }
K() { s=/dev/null; F=0; j=; l=; Zt="$n.z"; true >"$n.c" || return 0; cat >"$n.p" || return 0
if [ -f "$1" ] && [ ! -L "$1" ] && cat -- "$1" >"$n.s" 2>/dev/null && [ -n "$3" ] && [ -f "$2" ] && [ ! -L "$2" ] && d=$(H "$2" 2>/dev/null) && [ "${d%% *}" = "$3" ]; then
s="$n.s"; Z ' %m ' ' %a ' >"$n.c" 2>/dev/null || true >"$n.c"
if a=$(wc -l <"$n.p" 2>/dev/null) && b=$(wc -l <"$n.c" 2>/dev/null) && [ "$b" -gt 0 ] && [ "$((a * 2))" -ge "$((b))" ] && rmdir "$n" >/dev/null 2>&1; then cp -al . "$n" >/dev/null 2>&1 & j=$!; fi
else Z ' %m ' ' %a ' >"$n.c" 2>/dev/null || true >"$n.c"; fi
Q "$s" "$n.c"; q=$?
if [ -n "$j" ] && wait "$j"; then l=1; fi
if [ "$q" != 0 ]; then U
elif [ ! -s "$n.l" ]; then U && . "$n.r"
elif ! read w <"$n.n" || [ "$w" != link ]; then U && Q /dev/null "$n.c" && . "$n.r"
elif { [ -n "$l" ] || { [ -z "$j" ] && rmdir "$n" >/dev/null 2>&1 && cp -al . "$n" >/dev/null 2>&1; }; } && (cd "$n" && { { [ "$(id -u 2>/dev/null)" = 0 ] || find . -type d ! -perm -700 -exec chmod u+rwx {} +; } && T && V >"$n.k" && tr '\n' '\0' <"$n.x" | xargs -0 rm -f -- && { find . -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null || :; }; } >/dev/null 2>&1); then cat "$n.k"; . "$n.r"
else W && Q /dev/null "$n.c" && . "$n.r"; fi
rm -f "$n.c" "$n.p" "$n.l" "$n.r" "$n.f" "$n.x" "$n.k" "$n.n" "$n.s" "$n.z" >/dev/null 2>&1; }
`

// carryBatch bounds the bytes of file names one C call holds (ARG_MAX is
// 128 KiB per argument and about 2 MiB in all on Linux).
const carryBatch = "98304"

// write writes the carry as shell lines: from the previous copy dst into
// tmp's new tree, reporting links and hashes (when $ah is 1: the sandbox
// can hash). It leaves the working directory where it found it.
func (p *CarryPlan) write(sb *strings.Builder, tmp, dst, from string) {
	// The previous copy is entered through its root, never through a link
	// planted at dst: its physical path must be the root's and its name.
	fmt.Fprintf(sb, "n=%s; e=%s\nif [ \"$ah\" = 1 ] && mkdir -p \"$n\" && cd -P %s 2>/dev/null && q=$(pwd -P) && [ -d \"$e\" ] && [ ! -L \"$e\" ] && cd -P \"./$e\" 2>/dev/null && [ \"$(pwd -P)\" = \"${q%%/}/$e\" ]; then\n",
		Quote(tmp+"/new/tree"), Quote(path.Base(dst)), Quote(path.Dir(dst)))
	sb.WriteString(stampFuncs)
	sb.WriteString(carryFuncs)
	if len(p.lines) >= SplitFiles {
		sb.WriteString(splitVar)
	}
	fmt.Fprintf(sb, "K %s %s %s ", Quote(stampsOf(dst)), Quote(path.Join(path.Dir(dst), ManifestName(path.Base(dst)))), Quote(p.Manifest))
	if from != "" {
		sb.WriteString("<" + Quote(from)) // the plan is a file (Send.PlanIn)
	} else {
		sb.WriteString("<<'" + carryEnd + "'\n" + p.text() + carryEnd)
	}
	sb.WriteString("\ncd / || exit 1\nfi\n")
}

// text returns the plan's lines, each ending in a newline.
func (p *CarryPlan) text() string {
	var sb strings.Builder
	sb.Grow(p.Size)
	for _, l := range p.lines {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// writePlanIn writes the part of a send command that takes its carry plan
// on stdin (Send.PlanIn): it extracts the plan's archive (WritePlan) into
// the temporary directory, then carries it. A plan that does not arrive
// whole ends the command.
func writePlanIn(sb *strings.Builder, tmp, dst string, p *CarryPlan) {
	fmt.Fprintf(sb, "cd %s || exit 1\ntar -x -o -f - >&2 || exit 1\n[ -f %s ] && [ ! -L %[2]s ] || exit 1\n", Quote(tmp), TarPlan)
	p.write(sb, tmp, dst, path.Join(tmp, TarPlan))
}

// carryEnd ends the plan in the script: no plan line, which starts with a
// mode and a space, can equal it.
const carryEnd = "airlock-carry-end"

// StdinScript is the script of a command whose script travels on its
// stdin (CarryScript): it has sh read it from there.
const StdinScript = "exec /bin/sh -s"

// CarryScript is the carry of a plan too long to travel in the send
// command's script, as a command of its own (its script travels on stdin,
// so its length is not bounded by ARG_MAX): it prints ReadyLine, copies
// the files from the previous copy dst into tmp's new tree, prints their
// hashes and CarriedLine (see Report).
func CarryScript(p *CarryPlan, tmp, dst string) string {
	var sb strings.Builder
	sb.WriteString("umask 0\nah=1\necho " + ReadyLine + "\n")
	p.write(&sb, tmp, dst, "")
	sb.WriteString("echo " + CarriedLine + "\nexit 0\n")
	return sb.String()
}

// PublishScript moves the transferred tree in tmp into place at dst and
// its manifest to mf, then deletes the old copy. The old manifest leaves
// before the old tree, in one mv, so that no moment pairs a manifest with
// a tree it does not describe. Before the renames, the stream's modes
// script (TarModes) gives every directory of the new tree its manifest
// mode, whatever the sandbox's tar did with the directories the carry had
// made. With exchange (mv --exchange), the new tree and the old one trade
// places in one atomic rename, so a reader finds either copy at dst, never
// nothing; without it, or when the exchange fails, two renames leave dst
// absent for an instant (never partial). The old copy stays inside tmp,
// which the command claims first (its owner file names the command's
// shell), so that a command killed before it deleted it leaves a
// directory the next sweep removes. Once it has claimed tmp, before its
// first rename, it puts the asset's sweep marker in place (markScript),
// and deletes it as its last step once the old copy and the stamps'
// directory are gone: a command killed in between leaves it, so that a
// probe that runs no shell still has the root swept (see
// SweepMarkerName). Only renames come before PublishedLine. name is the
// asset's (dst's base name).
func PublishScript(tmp, dst, mf, name string, exchange, split bool, guard []FileID) string {
	var sb strings.Builder
	// What the publish makes (the owner file, the sweep marker, the stamps
	// and their directory) no other user may write: after a send
	// command's extraction the umask is 0.
	sb.WriteString("umask 022\n")
	if split {
		sb.WriteString(splitVar)
	}
	fmt.Fprintf(&sb, `%st=%s; d=%s; m=%s
%s%s
if [ ! -f "$t/complete" ] || [ ! -d "$t/new/tree" ] || [ -L "$t/new/tree" ] || [ ! -f "$t/new/manifest.json" ] || [ -L "$t/new/manifest.json" ] || [ ! -d "$t/old" ] || [ -L "$t/old" ] || [ ! -f "$t/modes" ] || [ -L "$t/modes" ]; then echo "transfer incomplete: $t lacks part of the stream" >&2; exit 3; fi
%s || { S; exit 3; }
%s%sif ! (cd "$t" && . ./modes); then echo "cannot set the modes of the directories in $t/new/tree; stage again" >&2; exit 3; fi
s=%s
if [ -e "$s" ] || [ -L "$s" ]; then mv -f "$s" "$t/old/" || exit %[11]d; fi
if [ -e "$m" ] || [ -L "$m" ]; then mv -f "$m" "$t/old/" || exit %[11]d; fi
if [ -d "$d" ] && [ ! -L "$d" ] && [ ! -w "$d" ]; then chmod u+w "$d" 2>/dev/null; fi
x=
`, finishAlone, Quote(tmp), Quote(dst), Quote(mf), renameFunc, sweptFunc, claimOwnerScript, guardScript(guard)+mountsFunc+mountCheckFunc+"Mx \"$d\"\n", markScript(markerOf(dst, name)), Quote(stampsOf(dst)), RenameExit)
	if exchange {
		sb.WriteString(`if [ -d "$d" ] && [ ! -L "$d" ] && mv -T --exchange "$t/new/tree" "$d" 2>/dev/null; then x=1; fi
`)
	}
	fmt.Fprintf(&sb, `if [ -z "$x" ]; then
if [ -e "$d" ] || [ -L "$d" ]; then mv -f "$d" "$t/old/" || exit %[6]d; fi
if ! R "$t/new/tree" "$d"; then echo "cannot move the new copy to $d: it is in use, or another stage put one there meanwhile; stage again" >&2; R %[1]s "$d"; exit %[6]d; fi
fi
mv -f "$t/new/manifest.json" "$m" || exit 5
echo %[2]s
%[3]s%[4]s%[5]s%[7]sexit 0`, Quote(path.Join(tmp, TarOld, name)), PublishedLine, stampsDir(dst), dropScript(tmp), recordStamps(dst), RenameExit, unmarkScript("[ ! -e \"$n\" ] && [ ! -L \"$n\" ] && "))
	return sb.String()
}

// sweptFunc defines S (with $t the temporary directory), which ends the
// publish with RenameExit, saying so, when $t is gone: a stage through
// another Bridge or host, whose sweep cannot know that this host still
// uses it between its transfer and its publish (no sandbox process owns it
// then; see Skip), took it. Nothing was moved, the previous copy stays,
// and staging again succeeds. S is called before the completeness check
// and when the claim fails; a $t that is there but incomplete stays a
// broken transfer (status 3).
var sweptFunc = fmt.Sprintf(`S() { if [ ! -e "$t" ] && [ ! -L "$t" ]; then echo "the transfer's temporary directory $t is gone: a stage through another connection swept it between the transfer and this publish, and nothing was moved; stage again" >&2; exit %d; fi; }
S`, RenameExit)

// renameFunc defines R FROM TO, which renames FROM to TO and fails when TO
// exists (a directory other than an empty one): mv would move FROM into
// it, and a copy another stage published at TO an instant before (two
// uncoordinated hosts staging the same asset) would end up holding this
// one as a subdirectory. mv -T (GNU, BusyBox) says so in the rename
// itself; an mv without -T gets a check just before the rename.
const renameFunc = `R() { mv -T "$1" "$2" 2>/dev/null || { [ -e "$1" ] && [ ! -e "$2" ] && [ ! -L "$2" ] && mv "$1" "$2"; }; }
`

// stampsOf returns the stamps file of the copy at dst.
func stampsOf(dst string) string { return path.Join(path.Dir(dst), StampsName(path.Base(dst))) }

// stampsDir makes, before the old copy is deleted, the directory the
// stamps are written in (recordStamps): named as the sweep's own
// (GonePrefix, this shell's pid), so that a command killed from here on
// leaves a directory of a dead owner, which the next probe or setup
// sweeps, whether or not that stage publishes this asset (one of this pid
// is a dead process's: removed first). Made before the deletion, it also
// leaves no instant between the deletion's end and the stamps in place
// that shows neither. Only its owner may enter it (mode 700): the stamps
// are written into it by name. $n names it, $nd is set when it was made.
func stampsDir(dst string) string {
	return fmt.Sprintf(`n=%s$$'-stamps'; nd=
if (umask 077 && mkdir "$n") 2>/dev/null || { rm -rf "$n" 2>/dev/null && (umask 077 && mkdir "$n") 2>/dev/null; }; then nd=1; fi
`, Quote(path.Join(path.Dir(dst), GonePrefix)))
}

// recordStamps records the stamps of the copy at dst (see StampsName) in
// the directory stampsDir made, then renames them into place, once the old
// copy is deleted (deleting a link changes the change time of the file it
// shared). Best effort: without stamps the next carry hashes. (".new"
// beside the stamps is an earlier version's name for them: removed here.)
func recordStamps(dst string) string {
	return fmt.Sprintf(`%ss=%s
rm -f "$s.new" 2>/dev/null
if [ -n "$nd" ]; then
if [ -d %s ] && [ ! -L %s ] && (cd %s && Zt="$n/z" && Z) >"$n/s" 2>/dev/null; then mv -f "$n/s" "$s" 2>/dev/null; fi
rm -rf "$n" 2>/dev/null
fi
`, stampFuncs, Quote(stampsOf(dst)), Quote(dst), Quote(dst), Quote(dst))
}

// markerOf returns the sweep marker of the asset name published at dst.
func markerOf(dst, name string) string { return path.Join(path.Dir(dst), SweepMarkerName(name)) }

// claimOwnerScript (with $t the temporary directory) is claimScript that
// also leaves this shell's PID namespace in $ns, for the sweep marker
// (markScript), so that the publish reads it once.
const claimOwnerScript = `ns=$(readlink /proc/self/ns/pid 2>/dev/null)
{ { echo $$; echo "$ns"; } >"$t/` + OwnerFile + `.new" && mv -f "$t/` + OwnerFile + `.new" "$t/` + OwnerFile + `" >/dev/null; }`

// markScript (with $t the claimed temporary directory, $ns from
// claimOwnerScript) puts the sweep marker (SweepMarkerName) in place at
// marker, naming this shell, and leaves its path in $am. It is written in
// $t and renamed over whatever is at marker (a marker a killed publish
// left, a file or fifo the sandbox planted): a rename never opens what it
// replaces. A directory or link there (never the protocol's) is deleted
// first, else mv would move the marker into it, or into the directory the
// link names. Best effort: a publish without its marker only loses the
// sweep of a retry that has nothing to publish, should it be killed.
func markScript(marker string) string {
	return fmt.Sprintf(`am=%s
if { echo $$; echo "$ns"; } >"$t/sweep" 2>/dev/null; then if [ -d "$am" ] || [ -L "$am" ]; then rm -rf "$am" 2>/dev/null; fi; mv -f "$t/sweep" "$am" 2>/dev/null; fi
`, Quote(marker))
}

// unmarkScript deletes the sweep marker at $am (markScript) once the
// command has deleted what it moved aside (the temporary directory in $t
// gone) and cond, a list of tests ending in "&& " ("" for none), holds:
// what the command could not delete keeps it for the next sweep.
func unmarkScript(cond string) string {
	return `if ` + cond + `[ ! -e "$t" ] && [ ! -L "$t" ]; then rm -f "$am" 2>/dev/null; fi
`
}

// CleanupScript removes the temporary directory tmp of a failed publish of
// the asset name. If the publish had moved the previous copy aside, it is
// put back (to dst) with its manifest and stamps. It prints PublishedLine
// once that is done, then deletes what a send command killed while making
// tmp left (mkOwnedScript's NewPrefix name, which ends with tmp's random
// suffix: the caller knows that command has ended), and claims tmp and
// deletes it; last, the sweep marker the failed publish may have put in
// place, once tmp is gone, unless a copy is left at dst without a manifest
// (the publish failed between moving the old manifest away and putting
// the new one in place): the marker stays as that orphan copy's record
// (see O in markerFuncs), which the asset listing names.
func CleanupScript(tmp, dst, name string) string {
	dir, base := path.Split(tmp)
	mf := path.Join(path.Dir(dst), ManifestName(name))
	return fmt.Sprintf(`%st=%s; d=%s; o=%s; am=%s; m=%s; s=%s; om=%s; os=%s
%sif [ ! -e "$d" ] && [ ! -L "$d" ] && { [ -e "$o" ] || [ -L "$o" ]; } && R "$o" "$d"; then
if [ ! -e "$m" ] && [ ! -L "$m" ] && [ -f "$om" ] && [ ! -L "$om" ]; then mv -f "$om" "$m"; fi
if [ ! -e "$s" ] && [ ! -L "$s" ] && [ -f "$os" ] && [ ! -L "$os" ]; then mv -f "$os" "$s"; fi
fi
if [ -d "$t" ] && [ ! -L "$t" ]; then %s 2>/dev/null; fi
echo %s
for k in %s*%s; do if [ -d "$k" ] && [ ! -L "$k" ]; then rm -rf "$k" 2>/dev/null; fi; done
%s%sexit 0`, finishAlone, Quote(tmp), Quote(dst), Quote(path.Join(tmp, TarOld, name)), Quote(markerOf(dst, name)),
		Quote(mf), Quote(stampsOf(dst)), Quote(path.Join(tmp, TarOld, ManifestName(name))), Quote(path.Join(tmp, TarOld, StampsName(name))),
		renameFunc, claimScript, PublishedLine,
		Quote(dir+NewPrefix), Quote(base[strings.LastIndexByte(base, '-'):]), dropScript(tmp),
		unmarkScript(`{ [ -e "$m" ] || [ -L "$m" ] || { [ ! -e "$d" ] && [ ! -L "$d" ]; }; } && `))
}
