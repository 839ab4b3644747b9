package shell

import (
	"slices"
	"strings"

	"github.com/airlockdev/airlock/internal/tree"
)

// The staged section of a git sandbox's restore stream says what the
// sandbox's index holds where it differs from the round's baseline index
// (the index the prepare gave it). It is one of:
//
//   - empty: the index is the baseline's;
//   - "U" NUL: the index cannot be written as a tree (unmerged entries, a
//     path that is both a file and a directory, an object it names is
//     missing): its state does not come back;
//   - the records of git diff-index --cached -z --no-renames against the
//     baseline, ":<old mode> <new mode> <old id> <new id> <status>" NUL
//     "<path>" NUL each, then, when the index holds intent-to-add entries
//     (git add -N), an "I" NUL record and their paths, NUL-terminated.
//     An index whose tree git cannot read back (an entry's path is
//     absolute or has an empty component, which no git add writes) sends
//     its records without that list and without the index commit: its
//     bad path fails ParseStaged, by name.
//
// The objects the entries name travel in the restore's bundle: the
// snapshot commit's last parent is a commit of the index's tree (the tail
// line names it).
const (
	MaxStagedBytes = 16 << 20 // the longest staged section a restore stream may carry
	stagedNoTree   = "U"      // the record of an index that cannot be written as a tree
	stagedIntent   = "I"      // the record before the intent-to-add paths
	modeNone       = "000000" // the mode of a path absent on one side
)

// StagedEntry is the sandbox's index entry at one path that differs from
// the baseline's.
type StagedEntry struct {
	Path        string // a clean relative path
	Mode        string // "100644", "100755", "120000" or "160000"; "" when the path left the index (git rm)
	ID          string // the object the entry names, "" when the path left the index
	IntentToAdd bool   // an intent-to-add entry (git add -N): ID is git's placeholder, not content
}

// Staged is a restore stream's staged section, parsed.
type Staged struct {
	NoTree  bool          // the sandbox's index could not be written as a tree: nothing is known of it
	Entries []StagedEntry // sorted by Path, one each
}

// Empty reports a section that says the index is the baseline's.
func (s Staged) Empty() bool { return !s.NoTree && len(s.Entries) == 0 }

// ParseStaged reads a staged section (see above). Every record must be
// well formed: a known mode, object names of one length (zeros exactly
// where a side is absent), a status that matches the modes (A, D, M, or T
// for a change of object type), a clean relative path listed once; every
// intent-to-add path must be an entry of the section that is in the
// index. Anything else is a protocol error (ErrProtocol).
func ParseStaged(data []byte) (Staged, error) {
	var s Staged
	switch {
	case len(data) == 0:
		return s, nil
	case len(data) > MaxStagedBytes:
		return Staged{}, protocolf("the staged section is longer than %d bytes", MaxStagedBytes)
	case string(data) == stagedNoTree+"\x00":
		s.NoTree = true
		return s, nil
	case data[len(data)-1] != 0:
		return Staged{}, protocolf("the staged section does not end with NUL")
	}
	recs := strings.Split(string(data[:len(data)-1]), "\x00")
	at := map[string]int{}
	i := 0
	for ; i < len(recs) && recs[i] != stagedIntent; i += 2 {
		if i+1 == len(recs) {
			return Staged{}, protocolf("the staged record %.120q has no path", recs[i])
		}
		e, err := parseStagedRecord(recs[i], recs[i+1])
		if err != nil {
			return Staged{}, err
		}
		if _, dup := at[e.Path]; dup {
			return Staged{}, protocolf("the staged section lists %.120q twice", e.Path)
		}
		at[e.Path] = len(s.Entries)
		s.Entries = append(s.Entries, e)
	}
	if i < len(recs) {
		if i+1 == len(recs) {
			return Staged{}, protocolf("the staged section's intent-to-add list is empty")
		}
		for _, p := range recs[i+1:] {
			j, ok := at[p]
			switch {
			case !ok:
				return Staged{}, protocolf("the intent-to-add path %.120q is not among the staged entries", p)
			case s.Entries[j].Mode == "" || s.Entries[j].IntentToAdd:
				return Staged{}, protocolf("the intent-to-add path %.120q is not in the index, or listed twice", p)
			}
			s.Entries[j].IntentToAdd = true
		}
	}
	slices.SortFunc(s.Entries, func(a, b StagedEntry) int { return strings.Compare(a.Path, b.Path) })
	return s, nil
}

// parseStagedRecord reads one raw diff-index record, meta and path.
func parseStagedRecord(meta, p string) (StagedEntry, error) {
	bad := func(why string) (StagedEntry, error) {
		return StagedEntry{}, protocolf("bad staged record %.160q (%s)", meta, why)
	}
	rest, ok := strings.CutPrefix(meta, ":")
	f := strings.Split(rest, " ")
	if !ok || len(f) != 5 {
		return bad("want :<old mode> <new mode> <old id> <new id> <status>")
	}
	om, nm, oid, nid, st := f[0], f[1], f[2], f[3], f[4]
	ok1, ok2 := indexMode(om), indexMode(nm)
	switch {
	case !ok1 || !ok2:
		return bad("unknown mode")
	case !IsObjectName(oid) || !IsObjectName(nid) || len(oid) != len(nid):
		return bad("not two object names of one length")
	case (om == modeNone) != zeroID(oid) || (nm == modeNone) != zeroID(nid):
		return bad("an object name where a side is absent, or none where it is present")
	case !tree.ValidPath(p):
		return StagedEntry{}, protocolf("the staged section names %.120q, not a clean relative path", p)
	}
	switch {
	case st == "A" && om == modeNone && nm != modeNone,
		st == "D" && om != modeNone && nm == modeNone,
		st == "M" && om != modeNone && nm != modeNone && modeType(om) == modeType(nm) && om+oid != nm+nid,
		st == "T" && om != modeNone && nm != modeNone && modeType(om) != modeType(nm):
	default:
		return bad("the status does not match the modes")
	}
	e := StagedEntry{Path: p}
	if nm != modeNone {
		e.Mode, e.ID = nm, nid
	}
	return e, nil
}

// indexMode reports a mode an index entry may have, or modeNone.
func indexMode(m string) bool {
	switch m {
	case modeNone, "100644", "100755", "120000", "160000":
		return true
	}
	return false
}

// modeType is the object type a mode stands for: a file's blob, a link's
// blob, a submodule's commit.
func modeType(m string) byte {
	switch m {
	case "120000":
		return 'l'
	case "160000":
		return 'c'
	}
	return 'f'
}

// zeroID reports the object name git writes for an absent side.
func zeroID(id string) bool { return strings.Trim(id, "0") == "" }

// StagedRecords writes s as a staged section: the inverse of ParseStaged
// for what it accepts, with each entry's old side written as absent (A)
// or as a placeholder of the entry's kind. It is for tests and tools that
// play a sandbox; the sandbox's script writes git's own output.
func StagedRecords(s Staged) []byte {
	if s.NoTree {
		return []byte(stagedNoTree + "\x00")
	}
	var b strings.Builder
	var intent []string
	for _, e := range s.Entries {
		n := len(e.ID)
		if n == 0 {
			n = 40
		}
		zero := strings.Repeat("0", n)
		if e.Mode == "" {
			b.WriteString(":100644 " + modeNone + " " + strings.Repeat("1", n) + " " + zero + " D\x00" + e.Path + "\x00")
			continue
		}
		b.WriteString(":" + modeNone + " " + e.Mode + " " + zero + " " + e.ID + " A\x00" + e.Path + "\x00")
		if e.IntentToAdd {
			intent = append(intent, e.Path)
		}
	}
	if len(intent) > 0 {
		b.WriteString(stagedIntent + "\x00" + strings.Join(intent, "\x00") + "\x00")
	}
	return []byte(b.String())
}
