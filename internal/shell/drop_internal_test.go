package shell

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDropTwoRm: dropScript deletes a temporary directory whole, the
// copies a publish leaves in it (with $Zs: a large tree) in two rm at once
// ($t/old/NAME and $t/new/tree), and nothing outside it: not through a link planted where
// a copy lies, nor through links inside a copy; a directory without write
// permission (for a user other than root) goes too.
func TestDropTwoRm(t *testing.T) {
	for _, sh := range shells {
		for _, split := range []bool{true, false} {
			t.Run(sh.name+"/split="+strconv.FormatBool(split), func(t *testing.T) { testDrop(t, sh.argv, split) })
		}
	}
}

// testDrop is TestDropTwoRm under the shell argv, with $Zs set or not
// (without it, one rm deletes all).
func testDrop(t *testing.T, argv []string, split bool) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", argv[0], err)
	}
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	write(t, outside, "keep", "deep/keep")
	root := filepath.Join(base, "root")
	tmp := filepath.Join(root, NewPrefix+"1-abc")
	copyOf := func(dir string) {
		t.Helper()
		for i := range 6 {
			write(t, dir, "s"+strconv.Itoa(i)+"/f", "s"+strconv.Itoa(i)+"/d/g")
		}
		write(t, dir, ".hidden", "-dash/f", "top")
		if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "s2", "d"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	copyOf(filepath.Join(tmp, "old", "asset"))
	copyOf(filepath.Join(tmp, "new", "tree"))
	copyOf(filepath.Join(tmp, "pruned"))
	write(t, tmp, "owner", "old/"+ManifestName("asset"))
	// A link where a copy would lie, to a directory outside.
	if err := os.Symlink(outside, filepath.Join(tmp, "old", "planted")); err != nil {
		t.Fatal(err)
	}
	// rm logs its arguments, then deletes.
	bin, log := filepath.Join(base, "bin"), filepath.Join(base, "rm.log")
	rm, err := exec.LookPath("rm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "rm"), []byte("#!/bin/sh\necho \"$*\" >>"+Quote(log)+"\nexec "+Quote(rm)+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "t=" + Quote(tmp) + "\n" + dropScript(tmp) + "[ ! -e \"$t\" ] && [ ! -L \"$t\" ]"
	if split {
		script = splitVar + script
	}
	cmd := exec.Command(argv[0], append(argv[1:], "-c", script)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("drop: %v: %s", err, stderr.String())
	}
	b, err := os.ReadFile(log)
	if argv[0] == "busybox" && os.IsNotExist(err) {
		b, err = nil, nil // its own rm, not PATH's: the outcome is checked below
	}
	if err != nil {
		t.Fatal(err)
	}
	// The two copies a publish leaves, each in two rm of every other
	// entry (in glob order: ./-dash ./out ./s0 … ./s5 ./top ./.hidden);
	// the rest in one.
	halves := 0
	for l := range strings.Lines(string(b)) {
		switch strings.TrimSuffix(l, "\n") {
		case "-rf -- ./-dash ./s0 ./s2 ./s4 ./top", "-rf -- ./out ./s1 ./s3 ./s5 ./.hidden":
			halves++
		}
	}
	if want := map[bool]int{true: 4, false: 0}[split]; halves != want && b != nil {
		t.Fatalf("%d rm of half a copy, want %d:\n%s", halves, want, b)
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("the root holds %v (%v) after the drop", ents, err)
	}
	for _, f := range []string{"keep", "deep/keep"} {
		if b, err := os.ReadFile(filepath.Join(outside, f)); err != nil || string(b) != f {
			t.Fatalf("outside/%s: %q, %v", f, b, err)
		}
	}
}

// write makes each file under dir, holding its own name.
func write(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDropLinkedTemp: a temporary directory the sandbox replaced by a link
// to a directory outside the root (a home, say, holding old/NAME and
// new/tree) loses nothing there: the link goes, the files stay, under
// every shell, with $Zs set.
func TestDropLinkedTemp(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			base := t.TempDir()
			victim := filepath.Join(base, "home")
			var files []string
			for _, d := range []string{"old/docs", "new/tree", "old/src"} {
				for i := range 4 {
					files = append(files, d+"/f"+strconv.Itoa(i), d+"/s"+strconv.Itoa(i)+"/g")
				}
			}
			write(t, victim, files...)
			root := filepath.Join(base, "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(root, NewPrefix+"1-abc")
			if err := os.Symlink(victim, tmp); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", splitVar+"t="+Quote(tmp)+"\n"+dropScript(tmp))...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("drop: %v: %s", err, out)
			}
			for _, f := range files {
				if b, err := os.ReadFile(filepath.Join(victim, f)); err != nil || string(b) != f {
					t.Fatalf("%s outside the root: %q, %v", f, b, err)
				}
			}
			if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
				t.Fatalf("the link is still there: %v", err)
			}
		})
	}
}
