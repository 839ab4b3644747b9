package shell

import (
	"bytes"
	"path"
	"strings"

	"github.com/airlockdev/airlock/internal/tree"
)

// RuntimeDir is the directory the sandbox's scripts keep out of every
// restore and report (sandbox.RuntimeDir is this name; a test checks).
const RuntimeDir = ".airlock"

// The record types of a restore report (see FindReport). ReportNotAdded is
// not written by FindReport: ParseReport gives it to the paths that follow
// a git sandbox's G record.
const (
	ReportHardLink  = 'h' // a regular file with more than one link: refused
	ReportSetID     = 'u' // a setuid, setgid or sticky file: written without those bits
	ReportSpecial   = 's' // a FIFO, socket or device: refused
	ReportNestedGit = 'n' // an entry named .git below the top: refused, nothing below it looked at
	ReportRuntime   = 'r' // an entry at the top of the runtime directory, or the runtime directory that is not one
	ReportSubmodule = 'm' // a git sandbox's submodule (gitlink) directory that holds entries: none of them comes back
	ReportNotAdded  = 'g' // a path the sandbox's git did not add to its snapshot
)

// FindReport is the script fragment that writes the sandbox's list of
// entries that no tar header or git tree can be trusted to show, one
// record <type><./path>NUL each (the types above). It runs in the sandbox
// work tree; $rep names the file the report is written to, which is left
// out of it, as are airlock's own files in the runtime directory (the
// round's marker, the prepare lock). The walk is find's when the sandbox
// has find, else shellWalk's, which needs only sh and ls.
const FindReport = `{ if command -v find >/dev/null 2>&1; then find . \( -path ./.git -o -path ./` + RuntimeDir + ` \) -prune -o -name .git -prune -exec printf 'n%s\0' {} + -o -type f -links +1 -exec printf 'h%s\0' {} + -o -type f \( -perm -4000 -o -perm -2000 -o -perm -1000 \) -exec printf 'u%s\0' {} + -o ! -type f ! -type d ! -type l -exec printf 's%s\0' {} +
else ` + shellWalk + `
fi
rt=./` + RuntimeDir + `
if [ -L "$rt" ] || { [ -e "$rt" ] && [ ! -d "$rt" ]; }; then printf 'r%s\0' "$rt"
elif [ -d "$rt" ]; then for f in "$rt"/* "$rt"/.[!.]* "$rt"/..?*; do if { [ -e "$f" ] || [ -L "$f" ]; } && [ "$f" != "$rep" ] && [ "$f" != "$rt/` + RoundMarker + `" ] && [ "$f" != "$rt/` + PrepareLockName + `" ] && [ "$f" != "$rt/` + PrepareLockName + `.pid" ]; then printf 'r%s\0' "$f"; fi; done
fi; }`

// shellWalk writes the n, h, u and s records of FindReport without find: a
// recursive sh function over globs (links are never followed, .git and the
// runtime directory skipped), the type and mode tests of test(1), and the
// link count from ls -ln, read once a directory and per file only in a
// directory that holds a regular file with more than one link. ls -q keeps
// every name on one line; set -f keeps a name's glob characters literal.
const shellWalk = `aln() ( set -f; set -- $(ls -ldn -- "$1" 2>/dev/null); echo "${2:-1}" )
aw() {
  set -- "$1" "$(ls -lnqA -- "$1" 2>/dev/null | while read -r m n x; do case $m in -*) [ "$n" = 1 ] || { echo y; break; };; esac; done)"
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    case $f in ./.git) ;; */.git) printf 'n%s\0' "$f"; continue ;; esac
    if [ -L "$f" ] || [ ! -e "$f" ]; then continue; fi
    if [ -d "$f" ]; then case $f in ./.git|./` + RuntimeDir + `) ;; *) aw "$f" ;; esac
    elif [ -f "$f" ]; then
      if [ -n "$2" ] && [ "$(aln "$f")" != 1 ]; then printf 'h%s\0' "$f"
      elif [ -u "$f" ] || [ -g "$f" ] || [ -k "$f" ]; then printf 'u%s\0' "$f"; fi
    else printf 's%s\0' "$f"
    fi
  done
}
aw .`

// ParseReport reads a report's records into a map from path to record
// type. A record whose path is not a clean relative path, or whose type is
// unknown, is a protocol error (ErrProtocol), and so is a runtime-directory
// record (r) for a path outside the runtime directory and a nested-.git
// record (n) for a path not named .git below the top. A git sandbox's
// report ends with a G record (no path) and then the paths,
// NUL-terminated and without "./", that its git did not add to the
// snapshot (an invalid path for git, an unreadable file), recorded as
// ReportNotAdded unless an earlier record names them.
func ParseReport(rep []byte) (map[string]byte, error) {
	out := map[string]byte{}
	if len(rep) == 0 {
		return out, nil
	}
	if rep[len(rep)-1] != 0 {
		return nil, protocolf("the report does not end with NUL")
	}
	notAdded := false
	for _, rec := range bytes.Split(rep[:len(rep)-1], []byte{0}) {
		if notAdded {
			p := strings.TrimSuffix(string(rec), "/") // a directory git could not add as a submodule
			if !tree.ValidPath(p) {
				return nil, protocolf("the report names %.120q, not a clean relative path", rec)
			}
			if out[p] == 0 {
				out[p] = ReportNotAdded
			}
			continue
		}
		if len(rec) == 1 && rec[0] == 'G' {
			notAdded = true
			continue
		}
		if err := parseRecord(rec, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseRecord adds one <type><./path> record to out.
func parseRecord(rec []byte, out map[string]byte) error {
	if len(rec) < 3 {
		return protocolf("a report record is too short")
	}
	p, ok := strings.CutPrefix(string(rec[1:]), "./")
	if !ok || !tree.ValidPath(p) {
		return protocolf("the report names %.120q, not a clean relative path", rec[1:])
	}
	switch rec[0] {
	case ReportHardLink, ReportSetID, ReportSpecial, ReportSubmodule:
	case ReportNestedGit:
		if path.Base(p) != ".git" || p == ".git" {
			return protocolf("the report names %.120q as a nested .git", p)
		}
	case ReportRuntime:
		if p != RuntimeDir && !strings.HasPrefix(p, RuntimeDir+"/") {
			return protocolf("the report names %.120q as a runtime directory entry", p)
		}
	default:
		return protocolf("unknown report record type %q", rec[0])
	}
	out[p] = rec[0]
	return nil
}
