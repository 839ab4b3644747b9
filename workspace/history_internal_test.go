package workspace

import (
	"os"
	"strconv"
	"testing"

	"github.com/airlockdev/airlock/internal/owner"
)

// TestRecommit: only the tree and parents change; signatures go (with
// their continuation lines); every other header and the message stay byte
// for byte.
func TestRecommit(t *testing.T) {
	raw := "tree aaaa\nparent bbbb\nparent cccc\nauthor A <a@x> 1700000000 +0100\ncommitter C <c@x> 1700000001 -0230\n" +
		"encoding ISO-8859-1\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\nmergetag object dddd\n type commit\n" +
		"x-extra kept\n continued\n\nsubject\n\n body\n\n"
	got, err := recommit([]byte(raw), "tttt", []string{"pppp"})
	if err != nil {
		t.Fatal(err)
	}
	want := "tree tttt\nparent pppp\nauthor A <a@x> 1700000000 +0100\ncommitter C <c@x> 1700000001 -0230\n" +
		"encoding ISO-8859-1\nx-extra kept\n continued\n\nsubject\n\n body\n\n"
	if string(got) != want {
		t.Errorf("recommit =\n%q\nwant\n%q", got, want)
	}
	if _, err := recommit([]byte("tree aaaa\nauthor A"), "t", nil); err == nil {
		t.Error("a commit without the blank line was accepted")
	}
}

// TestOwnerAlive: this process and a live one are alive; a malformed tag,
// a pid that is gone and a live pid with another start time are not.
func TestOwnerAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	self := owner.Tag()
	if !owner.Alive(self) {
		t.Errorf("owner.Alive(%q) (this process) = false", self)
	}
	pid, start, ok := owner.Parse(self)
	if !ok || pid != os.Getpid() || start == 0 {
		t.Errorf("owner.Parse(%q) = %d, %d, %v", self, pid, start, ok)
	}
	ppid := owner.TagOf(os.Getppid())
	if !owner.Alive(ppid) {
		t.Errorf("owner.Alive(%q) (the parent) = false", ppid)
	}
	for _, tag := range []string{"", "1", "x.1", "01.2", "-1.2", "1.-2", "1.02", strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(start+1, 10), "2147483646.1"} {
		if owner.Alive(tag) {
			t.Errorf("owner.Alive(%q) = true", tag)
		}
	}
}
