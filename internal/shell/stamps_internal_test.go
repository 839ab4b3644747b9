package shell

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStampsTwoFinds: Z with $Zs and $Zt (two finds, each taking every other entry
// of the working directory) lists exactly the lines one find lists, under
// every shell, whatever the top level holds: hidden names (".x", "..y"),
// names find or the shell could read as options or expressions ("-name",
// "!", "("), spaces and a newline, a file, a link to a directory outside
// (not followed), a fifo, an empty directory, a directory that cannot be
// read (its find fails, and so does Z). Without $Zt (or $Zs), or with fewer
// than two entries, or more than 512, one find lists.
func TestStampsTwoFinds(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	write(t, outside, "secret")
	tree := filepath.Join(base, "tree")
	write(t, tree, "a/1", "a/b/2", ".x/3", "..y/4", "-name/5", "!/6", "(/7", "with space/8", "new\nline/9", "top", ".hid", "b/c/d/e/10")
	for i := range 9 {
		write(t, tree, "many/"+strconv.Itoa(i)+"/f")
	}
	if err := os.Symlink(outside, filepath.Join(tree, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tree, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tree, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(base, "one")
	write(t, one, "only/a", "only/b")
	wide := filepath.Join(base, "wide")
	for i := range 600 {
		write(t, wide, "f"+strconv.Itoa(i))
	}
	z := filepath.Join(base, "z")
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			list := func(dir, zt string, split bool) (string, error) {
				t.Helper()
				script := stampFuncs + `Zt=$1; cd "$2" && Z ' %m ' ' %a '`
				if split {
					script = splitVar + script
				}
				cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", script, "sh", zt, dir)...)
				var out, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &stderr
				err := cmd.Run()
				if err != nil {
					err = &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: stderr.Bytes()}
				}
				return out.String(), err
			}
			// Two finds need find's -printf (BusyBox's find, which this
			// shell may run, lacks it: stat lists, in one walk).
			printf := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", "find . -maxdepth 0 -printf ''")...).Run() == nil
			for _, dir := range []string{tree, one, wide} {
				want, err := list(dir, "", true)
				if err != nil {
					t.Fatalf("%s: one find: %v", dir, err)
				}
				if err := os.RemoveAll(z); err != nil {
					t.Fatal(err)
				}
				got, err := list(dir, z, true)
				if err != nil {
					t.Fatalf("%s: two finds: %v", dir, err)
				}
				if sorted(got) != sorted(want) || want == "" {
					t.Fatalf("%s: two finds listed\n%s\none find\n%s", dir, got, want)
				}
				// The second find writes $Zt: it ran for the tree only.
				if _, err := os.Lstat(z); (err == nil) != (dir == tree && printf) {
					t.Fatalf("%s: $Zt written: %v", dir, err == nil)
				}
			}
			// A small tree (no $Zs): one find, whatever $Zt.
			if err := os.RemoveAll(z); err != nil {
				t.Fatal(err)
			}
			if got, err := list(tree, z, false); err != nil || sorted(got) == "" {
				t.Fatalf("one find: %q, %v", got, err)
			}
			if _, err := os.Lstat(z); err == nil {
				t.Fatal("$Zt written without $Zs")
			}
			for _, name := range []string{"secret", "fifo", "empty"} {
				if got, _ := list(tree, z, true); strings.Contains(got, name) {
					t.Fatalf("the listing names %s:\n%s", name, got)
				}
			}
			if os.Geteuid() == 0 {
				return // root reads the directory anyway
			}
			locked := filepath.Join(tree, "many", "3")
			if err := os.Chmod(locked, 0); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := os.Chmod(locked, 0o755); err != nil {
					t.Error(err)
				}
			}()
			if out, err := list(tree, z, true); err == nil {
				t.Fatalf("an unreadable directory: Z succeeded, listing\n%s", out)
			}
		})
	}
}

// sorted returns s's lines, sorted, as one string.
func sorted(s string) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}
