package shell

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The restore stream a workspace sandbox sends (both kinds):
//
//	airlock-restore 1\n
//	report <n>\n
//	<n bytes of report records (FindReport; a git sandbox's then G NUL
//	 and the paths its git did not add, NUL-terminated)>
//	staged <m>\n                       (a git sandbox's only)
//	<m bytes: the staged section (ParseStaged)>
//	<tail line>\n
//	<payload>
//
// A git sandbox's tail is "nochange" (no payload; the staged section is
// then empty) or "bundle <head|-> <snap> [<index>]" followed by a git
// bundle: <index> is the commit of the sandbox's index tree, the
// snapshot's last parent, present exactly when the staged section lists
// entries. A plain sandbox's tail is "empty" or "tar" followed by a tar
// stream; either ends with the end line (RestoreEnd), which the sandbox
// writes only once its tar succeeded, so a stream cut anywhere (even
// between two tar members, where a tar stream may end) lacks it
// (ReadRestoreEnd).
const (
	RestoreMagic   = "airlock-restore 1"
	RestoreEnd     = "airlock-restore end"
	MaxReportBytes = 16 << 20 // the longest report a restore stream may carry
	MaxLineBytes   = 256      // the longest header line
)

// The tails of a restore stream (RestoreHeader.Tail).
const (
	TailNoChange = "nochange" // git: nothing changed, no payload
	TailBundle   = "bundle"   // git: a bundle follows
	TailEmpty    = "empty"    // plain: the directory is empty, no payload
	TailTar      = "tar"      // plain: a tar stream follows
)

// RestoreHeader is the parsed start of a restore stream.
type RestoreHeader struct {
	Special map[string]byte // path -> its report record type (ParseReport)
	Staged  Staged          // git: the sandbox's index against the baseline's (ParseStaged)
	Tail    string          // TailNoChange, TailBundle, TailEmpty or TailTar
	Head    string          // bundle: the sandbox HEAD, "" when unborn
	Snap    string          // bundle: the snapshot commit
	Index   string          // bundle: the commit of the sandbox's index tree, "" when Staged lists no entry
}

// ReadRestoreHeader parses the start of a restore stream from br (a git
// sandbox's when git is true, else a plain one's), leaving br at the
// payload. Everything is bounded: lines by MaxLineBytes, the report by
// MaxReportBytes, the staged section by MaxStagedBytes. A stream that breaks the format is a protocol error
// (ErrProtocol); one that ends early is the transport's failure when the
// reader failed with one (ErrTransport, or the context's error), else a
// protocol error too.
func ReadRestoreHeader(br *bufio.Reader, git bool) (RestoreHeader, error) {
	l, err := readLine(br)
	if err != nil {
		return RestoreHeader{}, err
	}
	if l != RestoreMagic {
		return RestoreHeader{}, protocolf("the restore stream starts with %.80q, want %q", l, RestoreMagic)
	}
	if l, err = readLine(br); err != nil {
		return RestoreHeader{}, err
	}
	rep, err := readSection(br, l, "report", MaxReportBytes)
	if err != nil {
		return RestoreHeader{}, err
	}
	h := RestoreHeader{}
	if h.Special, err = ParseReport(rep); err != nil {
		return RestoreHeader{}, err
	}
	if git {
		if l, err = readLine(br); err != nil {
			return RestoreHeader{}, err
		}
		st, err := readSection(br, l, "staged", MaxStagedBytes)
		if err != nil {
			return RestoreHeader{}, err
		}
		if h.Staged, err = ParseStaged(st); err != nil {
			return RestoreHeader{}, err
		}
	}
	if l, err = readLine(br); err != nil {
		return RestoreHeader{}, err
	}
	if err := h.parseTail(l, git); err != nil {
		return RestoreHeader{}, err
	}
	return h, nil
}

// readSection reads the section that the header line l ("<name> <n>")
// announces: n bytes, at most max.
func readSection(br *bufio.Reader, l, name string, max int) ([]byte, error) {
	ns, ok := strings.CutPrefix(l, name+" ")
	n, perr := strconv.Atoi(ns)
	if !ok || perr != nil || n < 0 || n > max || strconv.Itoa(n) != ns {
		return nil, protocolf("bad %s line %.80q", name, l)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, Cut("the "+name+" ended early", err)
	}
	return b, nil
}

// parseTail reads the tail line l into h, whose staged section it must
// agree with.
func (h *RestoreHeader) parseTail(l string, git bool) error {
	f := strings.Split(l, " ")
	switch {
	case git && len(f) == 1 && f[0] == TailNoChange && h.Staged.Empty(), !git && len(f) == 1 && (f[0] == TailEmpty || f[0] == TailTar):
		h.Tail = f[0]
	case git && (len(f) == 3 || len(f) == 4) && f[0] == TailBundle && (f[1] == "-" || IsObjectName(f[1])) && IsObjectName(f[2]):
		h.Tail, h.Snap = TailBundle, f[2]
		if f[1] != "-" {
			h.Head = f[1]
		}
		if len(f) == 4 {
			h.Index = f[3]
		}
		if (h.Index != "") != (len(h.Staged.Entries) > 0) || (h.Index != "" && !IsObjectName(h.Index)) {
			return protocolf("the restore tail line %.80q does not name the index commit exactly when the staged section lists entries", l)
		}
	case git && len(f) == 1 && f[0] == TailNoChange:
		return protocolf("the restore tail line is %q after a staged section that lists changes", l)
	default:
		return protocolf("bad restore tail line %.80q", l)
	}
	return nil
}

// maxTarPad is the most zero bytes a plain restore stream may hold
// between its tar stream's end and the end line: a tar pads its archive
// to a whole record (10 KiB by default; a blocking factor of 2048, 1 MiB,
// is tar's largest).
const maxTarPad = 1 << 20

// ReadRestoreEnd reads the end of a plain restore stream from br, left
// after its payload: the tar stream's padding (zero bytes), the end line
// (RestoreEnd), then the stream's end. Without it the stream did not
// arrive whole, even if what came reads as a whole tar stream: the error
// is the transport's when the reader failed with one, else a protocol
// error (ErrProtocol).
func ReadRestoreEnd(br *bufio.Reader) error {
	for n := 0; ; n++ {
		c, err := br.ReadByte()
		if err != nil {
			return Cut("the restore stream ended before its end line "+strconv.Quote(RestoreEnd), err)
		}
		if c != 0 {
			if err := br.UnreadByte(); err != nil {
				return err
			}
			break
		}
		if n == maxTarPad {
			return protocolf("the restore stream holds more than %d zero bytes after its tar stream", maxTarPad)
		}
	}
	l, err := readLine(br)
	if err != nil {
		return err
	}
	if l != RestoreEnd {
		return protocolf("the restore stream ends with %.80q, want %q", l, RestoreEnd)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return Cut("the restore stream's end", err)
		}
		return protocolf("the restore stream goes on after its end line %q", RestoreEnd)
	}
	return nil
}

// readLine reads one header line of at most MaxLineBytes.
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", Cut("the restore stream ended inside a header line", err)
		}
		if c == '\n' {
			return string(b), nil
		}
		if len(b) >= MaxLineBytes {
			return "", protocolf("a restore header line is longer than %d bytes", MaxLineBytes)
		}
		b = append(b, c)
	}
}

// IsObjectName reports whether s is a git object name: 40 (SHA-1) or 64
// (SHA-256) lowercase hex digits.
func IsObjectName(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// restoreLockFmt is RestoreLock inside a fmt.Sprintf format.
var restoreLockFmt = strings.ReplaceAll(RestoreLock, "%", "%%")

// GitRestoreScript returns the script that streams a git sandbox's work
// tree back (the restore stream above, tail "nochange" or "bundle"),
// holding the work tree's lock (RestoreLock) from the start: it snapshots
// the work tree at remote through a scratch index named by the round id,
// limited to pathspecs, and bundles it from a ref named by the
// round. Before the snapshot, the scratch index (a copy of the sandbox's
// index) is written as a tree and compared with index, the tree of the
// index the round's prepare gave the sandbox, under the same pathspecs:
// that is the staged section, and the tree's commit becomes the
// snapshot's last parent when it lists entries, so the objects they name
// travel in the bundle. A tree that git cannot read back (written from
// an entry whose path is absolute or has an empty component) gets no
// commit: the section goes as it is, and the host refuses the path it
// names (ParseStaged), or the tail that names no index commit. That index, its lock, the staged section's files
// or the ref's lock, when one exists, is what a restore whose host was
// killed left (the host's restore lock serializes the restores of a work
// tree): they are removed first. The ref is deleted before the snapshot
// and after the bundle (dr); a git killed while deleting a ref leaves
// packed-refs.lock, which fails every later deletion, so where git cannot
// delete it the ref's loose file is removed, unless packed-refs holds the
// ref too (another git's lock is never removed).
// noChange lets the script answer "nochange" when the sandbox is as the
// round's prepare left it; a host whose baseline moved since (a Restore
// brought the sandbox's work) passes false, and gets the snapshot.
//
// The snapshot takes the work tree as it is. The scratch index's
// assume-unchanged and skip-worktree bits (which the agent may have set,
// and which git add would trust) are cleared first, one bit a pass (git
// update-index applies only the first of the two it is given). When git
// add -A stops on a file it cannot add (a working-tree-encoding the bytes
// do not have), the paths are added one by one, and the report lists
// what is still not added, modified files included. A file of the
// round's prepare snapshot that the work tree still holds is added even
// when the sandbox's git now ignores it (a .gitignore line the agent
// wrote, a global ignore file of the sandbox's): missing from the
// snapshot, it would read as deleted, and the host would delete the
// user's file. So every path of that snapshot the scratch index lacks is
// first put in it from the snapshot (git reset, one call with
// --pathspec-from-file, git 2.25), and git add -A then takes each as the
// work tree holds it, or drops it where the agent deleted it; no name is
// tested or decoded by the shell. A path's reset also drops the entries
// below it (a file the agent made a directory of); those are put back
// from the sandbox's index. A git before 2.25 resets one path a call:
// names travel through tr with \001 for a newline, and a name holding
// \001 is reset as a glob with ? there (a reset of a further snapshot path
// it matches is taken back by git add -A). A reset that fails (a full
// disk) fails the restore (exit 18) before anything is sent: a snapshot
// without those paths would read as their deletion. The report also names
// each submodule (gitlink) of the snapshot whose directory holds entries (an m
// record): git add -A never looks inside one (a name holding a newline is
// not found there, and not named).
//
// have names commits the host holds (hex ids): those the sandbox's
// repository holds too are left out of the bundle with all they reach
// (the commits an earlier Restore of the round brought, which every
// later bundle would carry again otherwise).
func GitRestoreScript(remote, id, tok, index string, noChange bool, pathspecs, have []string) string {
	specs := make([]string, len(pathspecs))
	for i, p := range pathspecs {
		specs[i] = Quote(p)
	}
	nc := ""
	if noChange {
		nc = "1"
	}
	return GitPrelude + fmt.Sprintf(`r=%s; id=%s; idx=%s; nc=%[7]s; tok=%[9]s
cd "$r" 2>/dev/null || { echo "the sandbox work tree $r is missing" >&2; exit 10; }
[ -d .git ] && [ ! -L .git ] || { echo "$r/.git is missing or not a directory" >&2; exit 11; }
GIT_DIR=.git g rev-parse --git-dir >/dev/null 2>&1 || { echo "$r/.git is not a usable git repository (HEAD, objects or refs missing): the sandbox's commits cannot be read" >&2; exit 11; }
`+restoreLockFmt+`export GIT_DIR=.git GIT_WORK_TREE=.
%[8]sbase=refs/airlock/base/$id
bs=$(g rev-parse -q --verify "$base/snap^{commit}") || { echo "$base/snap is missing in the sandbox: prepare the round again" >&2; exit 12; }
bh=$(g rev-parse -q --verify "$base/head^{commit}")
rm -f .git/airlock-restore-$id.* 2>/dev/null; gone_files .git/airlock-restore-$id-
sc=.git/airlock-restore-$id-$$-$tok; ti=$sc.index; rep=$sc.report; st=$sc.staged; ig=$sc.ignored; out=refs/airlock/out/$id/$$-$tok/snap
g for-each-ref --format='%%(refname)' "refs/airlock/out/$id/" 2>/dev/null | while IFS= read -r o; do q=${o#refs/airlock/out/$id/}; gone "$q" && g update-ref -d "$o" >/dev/null 2>&1; done
for o in .git/refs/airlock/out/$id/* .git/refs/airlock/out/$id/snap.lock; do [ -e "$o" ] && [ ! -L "$o" ] && gone "${o##*/}" && rm -rf "$o"; done
dr() { g update-ref -d "$out" >/dev/null 2>&1 || { [ -f ".git/$out" ] && [ ! -L ".git/$out" ] && ! grep -qF " $out" .git/packed-refs 2>/dev/null && rm -f ".git/$out"; }; }
dr
if [ -f .git/index ]; then cat .git/index > "$ti" && touch -r .git/index "$ti" || exit 13; fi
if it=$(GIT_INDEX_FILE=$ti g write-tree 2>/dev/null); then
  GIT_INDEX_FILE=$ti g diff-index --cached -z --no-renames "$idx" %[4]s > "$st" 2>/dev/null || { echo "cannot compare the sandbox's index with the round's ($idx): prepare the round again" >&2; rm -f "$ti" "$st"; exit 17; }
  if GIT_INDEX_FILE=$ti g diff-index --cached -z --no-renames --name-only "$it" %[4]s > "$st.i" 2>/dev/null; then
    if [ -s "$st.i" ]; then printf 'I\0' >> "$st"; cat "$st.i" >> "$st"; fi
  else
    it=
  fi
  rm -f "$st.i"
else
  it=; printf 'U\0' > "$st"
fi
sf() { echo "cannot put the round's files into the scratch index $r/$ti (a full disk?); nothing was changed locally: free space in the sandbox and restore again" >&2; rm -f "$ti" "$st" "$ig"; exit 18; }
pf=; g reset -h 2>/dev/null | grep -q -e --pathspec-from-file && pf=1
rs() {
  if [ -n "$pf" ]; then GIT_INDEX_FILE=$ti g --literal-pathspecs reset -q "$1" --pathspec-from-file="$ig" --pathspec-file-nul >/dev/null 2>&1; return; fi
  tr '\n\0' '\001\n' < "$ig" | while IFS= read -r f; do
    case $f in
    *"$(printf '\001')"*) GIT_INDEX_FILE=$ti g reset -q "$1" -- ":(glob)$(printf '%%s' "$f" | sed 's/[][*?\\]/\\&/g' | tr '\001' '?')" >/dev/null 2>&1;;
    *) GIT_INDEX_FILE=$ti g --literal-pathspecs reset -q "$1" -- "$f" >/dev/null 2>&1;;
    esac || exit 1
  done
}
GIT_INDEX_FILE=$ti g diff-index --cached -z --name-only --diff-filter=D "$bs" %[4]s > "$ig" 2>/dev/null || sf
if [ -s "$ig" ]; then
  rs "$bs" || sf
  if [ -n "$it" ]; then
    GIT_INDEX_FILE=$ti g diff-index --cached -z --name-only --diff-filter=D "$it" %[4]s > "$ig" 2>/dev/null || sf
    if [ -s "$ig" ]; then rs "$it" || sf; fi
  fi
fi
rm -f "$ig"
for b in --no-assume-unchanged --no-skip-worktree; do GIT_INDEX_FILE=$ti g ls-files -z %[4]s 2>/dev/null | GIT_INDEX_FILE=$ti g update-index -z $b --stdin >/dev/null 2>&1; done
am=
if ! GIT_INDEX_FILE=$ti g add -A --ignore-errors %[4]s >/dev/null 2>&1; then
  am=-m
  GIT_INDEX_FILE=$ti g ls-files -z -m -o --exclude-standard %[4]s 2>/dev/null | tr '\0' '\n' | while IFS= read -r f; do GIT_INDEX_FILE=$ti g add -A -- ":(literal)$f" >/dev/null 2>&1; done
fi
wt=$(GIT_INDEX_FILE=$ti g write-tree) || { rm -f "$ti" "$st"; exit 14; }
h=$(g rev-parse -q --verify 'HEAD^{commit}')
gitlinks() { tb=$(printf '\t'); GIT_INDEX_FILE=$ti g ls-files -s -z 2>/dev/null | tr '\n\0' '\001\n' | sed -n "s/^160000 [0-9a-f]* 0$tb//p" | while IFS= read -r m; do
  for x in "$m"/* "$m"/.[!.]* "$m"/..?*; do if [ -e "$x" ] || [ -L "$x" ]; then printf 'm./%%s\0' "$m"; break; fi; done
done; }
{ %[5]s; gitlinks; printf 'G\0'; GIT_INDEX_FILE=$ti g ls-files -z $am -o --exclude-standard %[4]s; } > "$rep" 2>/dev/null
rm -f "$ti"
ic=
if [ -n "$it" ] && [ -s "$st" ]; then ic=$(g commit-tree "$it" ${h:+-p "$h"} -m "airlock: sandbox index of round $id") || { rm -f "$st" "$rep"; exit 15; }; fi
n=$(( $(wc -c < "$rep") ))
printf '%[6]s\nreport %%d\n' "$n"; cat "$rep"; rm -f "$rep"
n=$(( $(wc -c < "$st") ))
printf 'staged %%d\n' "$n"; cat "$st"; rm -f "$st"
if [ -n "$nc" ] && [ "$h" = "$bh" ] && [ "$wt" = "$(g rev-parse "$bs^{tree}")" ] && [ "$n" = 0 ]; then printf 'nochange\n'; exit 0; fi
s=$(g commit-tree "$wt" ${h:+-p "$h"} ${ic:+-p "$ic"} -m "airlock: sandbox work tree of round $id") || exit 15
g update-ref "$out" "$s" || exit 16
printf 'bundle %%s %%s%%s\n' "${h:--}" "$s" "${ic:+ $ic}"
hv=; [ -z %[10]s ] || hv=$(printf '%%s\n' %[10]s | g cat-file --batch-check='%%(objectname) %%(objecttype)' 2>/dev/null | sed -n 's/ commit$//p' | tr '\n' ' ')
g bundle create - "$out" --not "$bs" ${bh:+"$bh"} $hv 2>/dev/null; x=$?
dr
exit $x
`, Quote(remote), Quote(id), Quote(index), strings.Join(specs, " "), FindReport, RestoreMagic, nc, fileModeProbe, Quote(tok), haveList(have))
}

// haveList is the have commits of GitRestoreScript as sh words: the hex
// ids among them, space-separated, or an empty sh word when none is.
func haveList(have []string) string {
	var ok []string
	for _, h := range have {
		if len(h) >= 40 && strings.Trim(h, "0123456789abcdef") == "" {
			ok = append(ok, h)
		}
	}
	if len(ok) == 0 {
		return "''"
	}
	return strings.Join(ok, " ")
}

// PlainRestoreScript returns the script that streams a plain sandbox
// directory back (the restore stream above, tail "empty" or "tar"). The
// report goes into the runtime directory, named by the round id, tok (a
// token the host draws for each run: two restores under an engine that
// gives each command a PID namespace of its own may share a pid) and the
// shell's pid; the report of a restore whose shell is gone (its host was
// killed) is removed first, one whose shell runs (a zombie does not)
// stays. A report that went while it was written (a sweep that could not
// see its shell, in another PID namespace) fails the restore (exit 16),
// which is then retried, rather than read as empty. The script holds the
// work tree's lock (RestoreLock) before it looks at anything. A runtime
// directory that the sandbox replaced by a file or a link is refused (the
// host lists it); the report then goes beside it. GNU tar
// is told --no-unquote, else it would read a backslash in a top-level
// name as an escape and not find the entry. With marked, the directory
// must hold the round's RoundMarker (exit 14 when it does not: the
// sandbox was reset, replaced or prepared for another round since).
func PlainRestoreScript(remote, id, tok string, marked bool) string {
	check := ""
	if marked {
		check = fmt.Sprintf(`m=$(cat "./$rd/%s" 2>/dev/null); [ ! -L "./$rd" ] && [ ! -L "./$rd/%s" ] && [ "$m" = "$id" ] || { echo "the sandbox directory $r does not hold round $id: its marker $rd/%s is missing or names another round: the sandbox was reset, replaced or prepared again since, or its runtime directory $rd was removed or replaced; nothing was changed locally: prepare a new round (the agent's work in the old sandbox cannot be read here)" >&2; exit 14; }
`, RoundMarker, RoundMarker, RoundMarker)
	}
	return goneFuncs + fmt.Sprintf(`r=%s; id=%s; tok=%s
cd "$r" 2>/dev/null || { echo "the sandbox directory $r is missing" >&2; exit 10; }
rd=%s
`+restoreLockFmt+check+`
mkdir -p "$rd" 2>/dev/null
if [ -d "$rd" ] && [ ! -L "$rd" ]; then
  for f in "$rd"/restore-*.*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    p=${f##*.}
    case $p in ''|*[!0-9]*) continue;; esac
    gone "$p" && rm -f "$f"
  done
fi
if [ -d "$rd" ] && [ ! -L "$rd" ]; then rep=./$rd/restore-$id.$tok.$$; else rep=./.airlock-restore-$id.$tok.$$; rm -f "$rep"; fi
%s > "$rep" 2>/dev/null
n=$(wc -c < "$rep" 2>/dev/null) && [ -f "$rep" ] || { echo "the restore's report $r/$rep went while it was written (another restore's sweep?): restore again" >&2; exit 16; }
n=$((n))
printf '%s\nreport %%d\n' "$n"; cat "$rep"; rm -f "$rep"
set --
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then [ "$f" = "$rd" ] || [ "./$f" = "$rep" ] || set -- "$@" "./$f"; fi
done
if [ $# -eq 0 ]; then printf 'empty\n%[7]s\n'; exit 0; fi
printf 'tar\n'
nq=; tar --no-unquote --version >/dev/null 2>&1 && nq=--no-unquote
tar -c $nq -f - "$@" || exit
printf '%[7]s\n'
`, Quote(remote), Quote(id), Quote(tok), Quote(RuntimeDir), FindReport, RestoreMagic, RestoreEnd)
}
