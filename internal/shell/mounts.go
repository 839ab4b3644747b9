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
// when SELF is given) and returns 1 when it found a mount point, 0 when it
// found none. Without /proc/self/mountinfo (not Linux, no /proc) there is
// nothing to read: it returns 0. With one but no awk that reads it
// (missing: a bwrap that binds /usr but not the /etc/alternatives its awk
// links through, an image without awk; or failing) the sh version does
// the same (Ms); for a DIR it cannot check (one holding a space, tab,
// newline or backslash) it returns 2: the caller refuses to delete
// (UncheckedMountsExit, or a probe's "unchecked awk"), never deletes
// unchecked.
const mountsFunc = "Mi() { [ -r /proc/self/mountinfo ] || return 0; P=$1 S=${2-} awk '" + mountsAwk + "' /proc/self/mountinfo; case $? in 0) return 0;; 1) return 1;; esac; Ms \"$1\" \"${2-}\" /proc/self/mountinfo; }\n" + mountsShFunc

// mountsShFunc defines Ms DIR SELF FILE, mountsAwk in sh for a sandbox
// without awk: it prints what mountsAwk prints for DIR (with SELF not
// empty, a mount at DIR too) reading the mountinfo FILE, and returns 1
// when it printed a mount point, 0 when none. It compares the fields as
// the kernel writes them, escaped: for a DIR without a space, tab,
// newline or backslash that is the same as comparing them decoded (the
// escapes are a prefix code, and no field that must equal or begin DIR
// can hold one). For a DIR with one it cannot tell: it returns 2.
const mountsShFunc = `Ms() { case $1 in *\\*|*' '*|*'	'*|*'
'*) return 2;; esac
mk=0 mz= zm= zr= zv=
while read -r mi mp mv mr mm mo || [ -n "$mm" ]; do [ -n "$mm" ] || continue; mk=$((mk+1))
if [ "$mm" = "$1" ] || [ "$mm" = / ] || case $1 in "$mm"/*) true;; *) false;; esac; then if [ -z "$mz" ] || [ ${#mm} -ge ${#zm} ]; then mz=$mk zm=$mm zr=$mr zv=$mv; fi; fi
mm=; done < "$3"
mq=$1; [ "$mq" = / ] || mq=$mq/
if [ -n "$mz" ]; then if [ "$zm" = / ]; then mx=$1; else mx=${1#"$zm"}; fi; if [ "$zr" = / ]; then ml=$mx; else ml=$zr$mx; fi; [ -n "$ml" ] || ml=/; if [ "$ml" = / ]; then mlq=/; else mlq=$ml/; fi; fi
mk=0 mn=0
while read -r mi mp mv mr mm mo || [ -n "$mm" ]; do [ -n "$mm" ] || continue; mk=$((mk+1)); [ $mn -lt 16 ] || break
if { [ -n "$2" ] && [ "$mm" = "$1" ]; } || { [ ${#mm} -gt ${#mq} ] && case $mm in "$mq"*) true;; *) false;; esac; }; then printf '%s\n' "$mm"; mn=$((mn+1))
elif [ -n "$mz" ] && [ $mk != "$mz" ] && [ "$mv" = "$zv" ] && { [ "$mr" = "$ml" ] || case $mr in "$mlq"*) true;; *) false;; esac; }; then printf '%s\n' "$mm"; mn=$((mn+1)); fi
mm=; done < "$3"
[ $mn = 0 ] || return 1; }
`

// UncheckedMountsExit is the exit status of a publish (PublishScript) or a
// removal (RemoveScript) whose sandbox has /proc/self/mountinfo but no awk
// that reads it: it cannot check for a file system mounted on what it
// would delete (Mx), and moved nothing.
const UncheckedMountsExit = 93

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
// part of it seen elsewhere (Mi, which mountsFunc defines), and with
// UncheckedMountsExit when Mi cannot tell.
const mountCheckFunc = `Mx() { if [ -d "$1" ] && [ ! -L "$1" ] && dq=$(cd -P -- "$1" 2>/dev/null && pwd -P); then mt=$(Mi "$dq" 1); case $? in
0) ;;
1) echo "a file system is mounted at ${mt%%"
"*}: on $dq, inside it, or on a part of it seen elsewhere; moving and deleting $dq would delete the files there; nothing was moved: unmount it, or stage under another name" >&2; exit 94;;
*) echo "the sandbox has /proc/self/mountinfo but no awk that reads it: it cannot check for a file system mounted on $dq or inside it, which moving and deleting $dq would delete; nothing was moved: install awk in the sandbox" >&2; exit 93;;
esac; fi; }
`
