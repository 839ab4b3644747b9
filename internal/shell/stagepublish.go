package shell

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// The publish of one asset over a shell target runs two sandbox commands:
// the send command (SendScript: setup, carry, transfer), whose report
// Report parses, and the publish (PublishScript), which prints
// PublishedLine once its renames are done; a failed publish's temporary
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
	// Skip names the temporary directories under Root the host still uses
	// (between a transfer and its publish), which the sweep leaves alone.
	Skip []string
	// Carry, when not nil, is carried in the command's own script.
	Carry *CarryPlan
}

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
	if parent := path.Dir(s.Root); parent != "/" {
		fmt.Fprintf(&sb, "p=%s\n[ -d \"$p\" ] || mkdir -p \"$p\" || exit 1\n", Quote(parent))
	}
	fmt.Fprintf(&sb, "r=%s\nif [ -L \"$r\" ] || { [ -e \"$r\" ] && [ ! -d \"$r\" ]; }; then rm -f \"$r\" || exit 1; fi\n", Quote(s.Root))
	sb.WriteString("[ -d \"$r\" ] || mkdir \"$r\" || exit 1\n")
	sb.WriteString(sweepFuncs)
	sb.WriteString(sweepScript(s.Skip))
	// The owner file names the process that writes into tmp (this shell,
	// then tar through exec), so that a later setup can tell a cut
	// transfer's directory from a live one (sweepScript); tmp never exists
	// without it (mkOwnedScript).
	sb.WriteString(mkOwnedScript(s.Tmp))
	fmt.Fprintf(&sb, "echo %s\numask 0\n", ReadyLine)
	// What the sweep moved away is deleted now, outside the control
	// deadline (a data step, bounded by the caller's context).
	sb.WriteString("D\n")
	if s.Carry != nil && len(s.Carry.Want) > 0 {
		s.Carry.write(&sb, s.Tmp, s.Dst)
	}
	fmt.Fprintf(&sb, "echo %s\ncd %s || exit 1\nexec tar -x -o -f -\n", CarriedLine, Quote(s.Tmp))
	return sb.String()
}

// MaxCarryArgs bounds the bytes of file names one carry line holds
// (ARG_MAX is 128 KiB per argument and about 2 MiB in all on Linux).
const MaxCarryArgs = 96 << 10

// CarryFile is a file to carry from the previous copy: its path (relative
// to the copy's top), its mode and the SHA-256 the manifest gives it.
type CarryFile struct {
	Path   string
	Mode   fs.FileMode
	SHA256 string // lowercase hex
}

// CarryPlan is the carry part of a publish: the files to copy inside the
// sandbox, as calls of the carry's function C in batches, and the hash
// each must have.
type CarryPlan struct {
	calls []string          // "C 644 'a' 'b'"; each under MaxCarryArgs bytes
	Want  map[string]string // path → lowercase hex SHA-256: what Report accepts
	Size  int               // bytes of the calls in a script
}

// PlanCarry plans carrying files. Files whose names the hash tools would
// print escaped, or that tar would read as options, are left out (sent).
func PlanCarry(files []CarryFile) CarryPlan {
	p := CarryPlan{Want: make(map[string]string, len(files))}
	byMode := make(map[string][]string)
	var modes []string
	for _, f := range files {
		if strings.ContainsAny(f.Path, "\\\n\r") || strings.HasPrefix(f.Path, "-") {
			continue
		}
		m := fmt.Sprintf("%o", f.Mode.Perm())
		if _, ok := byMode[m]; !ok {
			modes = append(modes, m)
		}
		byMode[m] = append(byMode[m], QuoteWord(f.Path))
		p.Want[f.Path] = f.SHA256
	}
	sort.Strings(modes)
	for _, m := range modes {
		p.batch(m, byMode[m])
	}
	return p
}

// batch adds the calls of C that carry the quoted names args of mode m,
// each line under MaxCarryArgs bytes.
func (p *CarryPlan) batch(m string, args []string) {
	var sb strings.Builder
	flush := func() {
		if sb.Len() > 0 {
			p.calls = append(p.calls, sb.String())
			p.Size += sb.Len() + 1
			sb.Reset()
		}
	}
	for _, a := range args {
		if sb.Len() > 0 && sb.Len()+1+len(a) > MaxCarryArgs {
			flush()
		}
		if sb.Len() == 0 {
			sb.WriteString("C " + m)
		}
		sb.WriteString(" " + a)
	}
	flush()
}

// carryFuncs defines the carry's shell functions. H hashes its arguments
// (openssl when the sandbox has it, which is several times faster than
// most sha256sum builds, else sha256sum; both print "<hex> <flag><path>").
// C MODE NAMES... copies NAMES from the previous copy (the working
// directory) into $n with tar, drops whatever arrived that is not a
// regular file, sets the manifest's MODE and hashes the rest. Errors are
// not fatal: a file whose hash is not reported is sent.
const carryFuncs = `H() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; else sha256sum -- "$@"; fi; }
C() { m=$1; shift
tar -c -f - -- "$@" 2>/dev/null | (cd "$n" && tar -x -o -f - 2>/dev/null)
(cd "$n" && for f; do if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then rm -rf -- "$f"; fi; done; chmod "$m" -- "$@"; H "$@") 2>/dev/null; }
`

// write writes the carry as shell lines: from the previous copy dst into
// tmp's new tree, reporting the hashes (when $ah is 1: the sandbox can
// hash). It leaves the working directory where it found it.
func (p *CarryPlan) write(sb *strings.Builder, tmp, dst string) {
	fmt.Fprintf(sb, "n=%s\nif [ \"$ah\" = 1 ] && mkdir -p \"$n\" && cd %s 2>/dev/null; then\n", Quote(tmp+"/new/tree"), Quote(dst))
	sb.WriteString(carryFuncs)
	for _, c := range p.calls {
		sb.WriteString(c)
		sb.WriteByte('\n')
	}
	sb.WriteString("cd / || exit 1\nfi\n")
}

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
	p.write(&sb, tmp, dst)
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
// directory the next sweep removes. Only renames come before
// PublishedLine. name is the asset's (dst's base name).
func PublishScript(tmp, dst, mf, name string, exchange bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `%st=%s; d=%s; m=%s
if [ ! -f "$t/complete" ] || [ ! -d "$t/new/tree" ] || [ -L "$t/new/tree" ] || [ ! -f "$t/new/manifest.json" ] || [ -L "$t/new/manifest.json" ] || [ ! -d "$t/old" ] || [ -L "$t/old" ] || [ ! -f "$t/modes" ] || [ -L "$t/modes" ]; then echo "transfer incomplete: $t lacks part of the stream" >&2; exit 3; fi
%s || exit 3
if ! (cd "$t" && . ./modes); then echo "cannot set the modes of the directories in $t/new/tree; stage again" >&2; exit 3; fi
if [ -e "$m" ] || [ -L "$m" ]; then mv -f "$m" "$t/old/" || exit 4; fi
x=
`, finishAlone, Quote(tmp), Quote(dst), Quote(mf), claimScript)
	if exchange {
		sb.WriteString(`if [ -d "$d" ] && [ ! -L "$d" ] && mv --exchange "$t/new/tree" "$d" 2>/dev/null; then x=1; fi
`)
	}
	fmt.Fprintf(&sb, `if [ -z "$x" ]; then
if [ -e "$d" ] || [ -L "$d" ]; then mv -f "$d" "$t/old/" || exit 4; fi
if ! mv "$t/new/tree" "$d"; then mv %s "$d"; exit 4; fi
fi
mv -f "$t/new/manifest.json" "$m" || exit 5
echo %s
%sexit 0`, Quote(path.Join(tmp, TarOld, name)), PublishedLine, dropScript(tmp))
	return sb.String()
}

// CleanupScript removes the temporary directory tmp of a failed publish of
// the asset name, putting back the previous copy (to dst) if the publish
// had moved it aside. It prints PublishedLine once the putting back is
// done, then claims tmp and deletes it.
func CleanupScript(tmp, dst, name string) string {
	return fmt.Sprintf(`%st=%s; d=%s; o=%s
if [ ! -e "$d" ] && [ ! -L "$d" ] && { [ -e "$o" ] || [ -L "$o" ]; }; then mv "$o" "$d"; fi
if [ -d "$t" ] && [ ! -L "$t" ]; then %s 2>/dev/null; fi
echo %s
%sexit 0`, finishAlone, Quote(tmp), Quote(dst), Quote(path.Join(tmp, TarOld, name)), claimScript, PublishedLine, dropScript(tmp))
}
