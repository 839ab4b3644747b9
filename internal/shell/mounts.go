package shell

import (
	"bytes"
	"strings"
)

// A directory a publish replaces, a removal takes away, or a workspace
// Prepare clears is deleted whole (rm -rf), and rm -rf enters a file
// system mounted inside it: a bind mount of a user's directory there (a
// container's volume, a mount a user made) would lose its files. And a
// bind mount may show a part of the directory elsewhere (a user who
// mounted a staged copy's directory at another path and made it a
// Source): deleting the directory deletes what is seen there. Where the
// sandbox has /proc/self/mountinfo (Linux), each of them first looks for
// such a mount, in the mount namespace it runs in, and refuses when it
// finds one. A workspace's Remote that is itself a mount point (a
// container's volume) is not refused: it is emptied, not moved; a staged
// copy that is one is (a publish or a removal moves it).

// MountExit is the exit status of a publish (PublishScript) or a removal
// (RemoveScript) that found a file system mounted on the copy it would
// move and delete, inside it, or on a part of it seen elsewhere
// (Mx: mountCheckFunc): it moved nothing.
const MountExit = 94

// MaxMounts bounds the mount points a check reports.
const MaxMounts = 16

// mountsAwk, an awk program with ENVIRON["P"] a physical directory path,
// reads a /proc/self/mountinfo and prints the mount points (field 5, as
// the kernel writes it: octal escapes for space, tab, newline and
// backslash, so one a line) strictly inside P, and those of the other
// mounts of P's file system whose root (field 4) is P's own path in that
// file system or below it (P's path there: the root of the mount P is in,
// the mount point with the longest match, followed by the rest of P), at
// most MaxMounts (16); paths are decoded for the comparisons. With
// ENVIRON["S"] not empty, a mount at P itself is printed too. It exits 1
// when it printed one.
const mountsAwk = `function dec(s) { gsub(/\\040/, " ", s); gsub(/\\011/, "\t", s); gsub(/\\012/, "\n", s); gsub(/\\134/, "\\\\", s); return s }
BEGIN { p = ENVIRON["P"]; o = ENVIRON["S"] != ""; n = 0; k = 0; z = 0 }
NF >= 5 { k++; e[k] = $5; m[k] = dec($5); r[k] = dec($4); v[k] = $3
if ((m[k] == p || m[k] == "/" || substr(p, 1, length(m[k]) + 1) == m[k] "/") && (!z || length(m[k]) >= length(m[z]))) z = k }
END { q = p; if (q != "/") q = q "/"
if (z) { x = m[z] == "/" ? p : substr(p, length(m[z]) + 1); l = (r[z] == "/" ? "" : r[z]) x; if (l == "") l = "/"; lq = l == "/" ? "/" : l "/" }
for (i = 1; i <= k && n < 16; i++) {
if ((o && m[i] == p) || (length(m[i]) > length(q) && substr(m[i], 1, length(q)) == q)) { print e[i]; n++ }
else if (z && i != z && v[i] == v[z] && (r[i] == l || substr(r[i], 1, length(lq)) == lq)) { print e[i]; n++ } }
exit n > 0 }`

// mountsFunc defines Mi DIR [SELF] (DIR a physical path), which prints
// what mountsAwk finds in /proc/self/mountinfo (a mount at DIR itself too
// when SELF is given) and fails when it found a mount point; without
// /proc/self/mountinfo (not Linux) or awk it cannot tell: it prints
// nothing and succeeds.
const mountsFunc = "Mi() { [ -r /proc/self/mountinfo ] || return 0; P=$1 S=${2-} awk '" + mountsAwk + "' /proc/self/mountinfo; [ $? != 1 ]; }\n"

// MountsInside returns the mount points of info (the content of a
// /proc/self/mountinfo) that deleting dir (a clean physical path) would
// reach: those strictly inside dir, and those of dir's file system whose
// root is dir or below it (a part of dir shown elsewhere), decoded, at
// most MaxMounts; with self, a mount at dir itself too (a directory that
// is to be replaced, not only emptied); what Mi finds in the sandbox, for
// the host (stage.Dir).
func MountsInside(info []byte, dir string, self bool) []string {
	type mount struct{ point, root, dev string }
	var ms []mount
	z := -1
	for line := range bytes.SplitSeq(info, []byte{'\n'}) {
		f := strings.Fields(string(line))
		if len(f) < 5 {
			continue
		}
		m := mount{point: unescapeMount(f[4]), root: unescapeMount(f[3]), dev: f[2]}
		ms = append(ms, m)
		if (m.point == dir || m.point == "/" || strings.HasPrefix(dir, m.point+"/")) && (z < 0 || len(m.point) >= len(ms[z].point)) {
			z = len(ms) - 1
		}
	}
	q := dir
	if q != "/" {
		q += "/"
	}
	var rel, relq string
	if z >= 0 {
		rest := strings.TrimPrefix(dir, ms[z].point)
		if ms[z].point == "/" {
			rest = dir
		}
		rel = strings.TrimSuffix(ms[z].root, "/") + rest // a root ends in "/" only when it is "/"
		if rel == "" {
			rel = "/"
		}
		relq = rel
		if rel != "/" {
			relq += "/"
		}
	}
	var out []string
	for i, m := range ms {
		if len(out) == MaxMounts {
			break
		}
		inside := (self && m.point == dir) || len(m.point) > len(q) && strings.HasPrefix(m.point, q)
		shows := z >= 0 && i != z && m.dev == ms[z].dev && (m.root == rel || strings.HasPrefix(m.root, relq))
		if inside || shows {
			out = append(out, m.point)
		}
	}
	return out
}

// unescapeMount decodes the octal escapes the kernel writes in a
// mountinfo path (space, tab, newline, backslash), as in a probe's mount
// line (internal/treetest decodes them too).
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// mountCheckFunc defines Mx DIR (DIR a directory the script is about to
// move away and delete whole), which ends the script with MountExit,
// saying so, when a file system is mounted on DIR, inside it, or on a
// part of it seen elsewhere (Mi, which mountsFunc defines).
const mountCheckFunc = `Mx() { if [ -d "$1" ] && [ ! -L "$1" ] && dq=$(cd -P -- "$1" 2>/dev/null && pwd -P) && ! mt=$(Mi "$dq" 1); then echo "a file system is mounted at ${mt%%"
"*}: on $dq, inside it, or on a part of it seen elsewhere; moving and deleting $dq would delete the files there; nothing was moved: unmount it, or stage under another name" >&2; exit 94; fi; }
`
