package shell

import (
	"bytes"
	"fmt"
	"strings"
)

// The unstage side of the stage protocol (stage.Bridge's Assets and
// Remove): listing the assets staged under a root, and removing some.

// RootLinkExit is the exit status of an AssetsScript or RemoveScript that
// found a symbolic link at the stage root.
const RootLinkExit = 7

// MaxAssetList bounds the reply of AssetsScript: a sandbox that sends more
// breaks the protocol.
const MaxAssetList = 4 << 20

// rootCheck refuses (exit RootLinkExit) a stage root that is a symbolic
// link, which the scripts would otherwise follow (harmless over SSH, where
// the sandbox owns everything it can reach, but through a local runner it
// would list or remove host files outside the root), and changes into the
// root; a missing root ends the script with status 0 (nothing staged).
func rootCheck(root string) string {
	return fmt.Sprintf(`r=%s
if [ -L "$r" ]; then echo "the stage root $r is a symbolic link; refusing to follow it: remove the link (the next Stage puts a directory there)" >&2; exit %d; fi
cd "$r" 2>/dev/null || exit 0
`, Quote(root), RootLinkExit)
}

// AssetsScript lists the stored manifests under root that are regular
// files, each name followed by a NUL (ParseAssetList reads the reply),
// and the manifest name of each orphan copy (a copy without its manifest
// beside its sweep marker: a command killed between the two; see O in
// markerFuncs), so that a prune removes it, unless the marker names a
// live process (a publish between its copy and its manifest, which a
// removal would leave with a manifest and no copy); then LeftoversLine
// when a sweep would remove something (none of the temporary directories
// named in skip, which the host still uses; AssetListLeftovers), so that
// a prune with nothing to remove still has them removed: what a cut
// removal left behind has no other command to sweep it when nothing is
// published.
func AssetsScript(root string, skip Skip) string {
	return rootCheck(root) + sweepFuncs + fmt.Sprintf(`for f in %[1]s*%[2]s; do if [ -f "$f" ] && [ ! -L "$f" ]; then printf '%%s\0' "$f"; fi; done
for f in %[3]s*; do n=${f#%[3]s}; if [ -n "$n" ] && { [ -e "$f" ] || [ -L "$f" ]; } && O "$n" && N "$f"; then printf '%[1]s%%s%[2]s\0' "$n"; fi; done
`, ManifestPrefix, ManifestSuffix, SweepPrefix) + leftoverCheck(skip)
}

// AssetListLeftovers reports whether AssetsScript's reply ends with
// LeftoversLine (no manifest name can be that record).
func AssetListLeftovers(reply []byte) bool {
	return bytes.HasSuffix(reply, []byte(LeftoversLine+"\n")) && (len(reply) == len(LeftoversLine)+1 || reply[len(reply)-len(LeftoversLine)-2] == 0)
}

// ParseAssetList returns the names of AssetsScript's reply (at most
// MaxAssetList bytes, which the caller bounds), in the order sent, empty
// names dropped. The names are the sandbox's: the caller checks them.
func ParseAssetList(reply []byte) []string {
	var files []string
	for f := range bytes.SplitSeq(reply, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files
}

// RemoveScript removes the assets names under root in one command: it
// sweeps the root (sweepScript, leaving the temporary directories in skip
// alone), makes the temporary directory tmp (a name in the root) and moves
// each asset's manifest and directory into it (renames only), each
// between its sweep marker's making (when it has a manifest and no
// marker, or a marker no live process owns) and deletion, prints
// PublishedLine, then deletes tmp and what the sweep moved away, and last
// the sweep markers that were no live process's when it began (see
// markerFuncs; a marker stays while its publish runs). A root that is a
// symbolic link is refused (RootLinkExit), a missing one has nothing to
// remove. Before anything else, when a file system is mounted inside a
// named asset's directory it ends with MountExit; when one (not a
// link) has one of the ids in guard (the Sources of the assets a prune
// keeps, and the directories above them, in a sandbox that shares the
// host's file system), it ends with SourceExit, saying so: it removed
// nothing.
func RemoveScript(root, tmp string, skip Skip, names []string, guard []FileID) string {
	var sb strings.Builder
	sb.WriteString(finishAlone)
	sb.WriteString(rootCheck(root))
	sb.WriteString(mountsFunc + mountCheckFunc)
	pats := idPatterns(guard)
	if len(pats) > 0 {
		// Gx DIR ends the script with SourceExit when DIR (./NAME) is one
		// of the guard's directories.
		fmt.Fprintf(&sb, `%sGx() { if [ -d "$1" ] && [ ! -L "$1" ]; then gi=$(G "$1") || U "$1"; case " $gi " in %s) echo "$r/${1#./} is the host's source directory of an asset being kept, or a directory above it (the sandbox shares the host's file system): removing it would delete that Source; nothing was removed: give that asset a Source outside the stage root, or stage without pruning" >&2; exit %d;; esac; fi; }
`, statIDFunc, strings.Join(pats, "|"), SourceExit)
	}
	for _, n := range names {
		fmt.Fprintf(&sb, "Mx %s\n", Quote("./"+n))
		if len(pats) > 0 {
			fmt.Fprintf(&sb, "Gx %s\n", Quote("./"+n))
		}
	}
	sb.WriteString(sweepFuncs)
	sb.WriteString("A\n")
	sb.WriteString(sweepScript(skip))
	sb.WriteString(mkOwnedScript(tmp))
	fmt.Fprintf(&sb, "t=%s; ns=$__ns\n", Quote(tmp))
	for i, n := range names {
		// The asset's sweep marker, this shell's (one a dead command
		// left is replaced: a concurrent sweep that noted it would
		// delete it): a removal killed between its manifest and its
		// copy leaves it as the record of the orphan copy (O in
		// markerFuncs). A live process's is left alone. Every name is
		// given as ./NAME: an asset name may start with a dash, which
		// mv and chmod would read as options.
		fmt.Fprintf(&sb, "u%[1]d=\nif { { [ -e %[3]s ] || [ -L %[3]s ]; } && N %[3]s; } || { [ ! -e %[3]s ] && [ ! -L %[3]s ] && { [ -e %[2]s ] || [ -L %[2]s ]; }; }; then %[4]s\nu%[1]d=1; fi\n",
			i, Quote("./"+ManifestName(n)), Quote("./"+SweepMarkerName(n)), strings.TrimSuffix(markScript("./"+SweepMarkerName(n)), "\n"))
		fmt.Fprintf(&sb, "if [ -d %[1]s ] && [ ! -L %[1]s ] && [ ! -w %[1]s ]; then chmod u+w %[1]s 2>/dev/null; fi\n", Quote("./"+n))
		for _, e := range AssetNames(n) {
			fmt.Fprintf(&sb, "if [ -e %[1]s ] || [ -L %[1]s ]; then mv -f %[1]s \"$t/\" || exit %[2]d; fi\n", Quote("./"+e), RenameExit)
		}
		fmt.Fprintf(&sb, "[ -z \"$u%d\" ] || rm -f %s 2>/dev/null\n", i, Quote("./"+SweepMarkerName(n)))
	}
	fmt.Fprintf(&sb, "echo %s\n", PublishedLine)
	sb.WriteString(dropScript(tmp))
	sb.WriteString("D\nE\nexit 0\n")
	return sb.String()
}
