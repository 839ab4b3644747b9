package shell

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sampleMountinfo holds mount points inside /srv/stage/a (one per escape
// the kernel writes), one at /srv/stage/a itself, and look-alikes that are
// not inside it.
const sampleMountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 8:1 /home/u/precious /srv/stage/a/mounted rw,relatime shared:1 - ext4 /dev/sda1 rw
31 22 0:40 / /srv/stage/a rw - tmpfs tmpfs rw
32 22 0:41 / /srv/stage/a\040b rw - tmpfs tmpfs rw
33 22 0:42 / /srv/stage/ab rw - tmpfs tmpfs rw
34 22 0:43 / /srv/stage/a/with\040space rw - tmpfs tmpfs rw
35 22 0:44 / /srv/stage/a/tab\011and\012newline rw - tmpfs tmpfs rw
36 22 0:45 / /srv/stage/a/back\134slash\134040 rw - tmpfs tmpfs rw
37 22 0:46 / /srv/stage rw - tmpfs tmpfs rw
short line
`

// shownMountinfo holds mounts of one file system (8:1) that show a part
// of /srv/stage/a elsewhere, one of its directory above (not a part of
// it), and one of another file system.
const shownMountinfo = `22 1 8:1 / / rw - ext4 /dev/sda1 rw
50 22 8:1 /srv/stage/a/scripts /mnt rw - ext4 /dev/sda1 rw
51 22 8:1 /srv/stage /other rw - ext4 /dev/sda1 rw
52 22 8:1 /srv/stage/a /again rw - ext4 /dev/sda1 rw
53 22 9:9 /srv/stage/a/x /dev9 rw - ext4 /dev/sdb1 rw
54 22 8:1 /srv/stage/ab /look-alike rw - ext4 /dev/sda1 rw
`

func TestMountsInside(t *testing.T) {
	for dir, want := range map[string][]string{
		"/srv/stage/a":         {"/mnt", "/again"},
		"/other/a":             {"/mnt", "/again"}, // the same directory, through the mount of its parent
		"/other/a/scripts":     {"/mnt"},           // /again shows its parent
		"/srv/stage/a/scripts": {"/mnt"},
		"/srv/stage":           {"/mnt", "/other", "/again", "/look-alike"},
		"/srv/stage/b":         nil,
	} {
		if got := MountsInside([]byte(shownMountinfo), dir, false); !slices.Equal(got, want) {
			t.Errorf("MountsInside(%s) = %q, want %q", dir, got, want)
		}
	}

	got := MountsInside([]byte(sampleMountinfo), "/srv/stage/a", false)
	want := []string{"/srv/stage/a/mounted", "/srv/stage/a/with space", "/srv/stage/a/tab\tand\nnewline", `/srv/stage/a/back\slash\040`}
	if !slices.Equal(got, want) {
		t.Fatalf("MountsInside = %q, want %q", got, want)
	}
	if got := MountsInside([]byte(sampleMountinfo), "/srv/stage/a b", false); len(got) != 0 {
		t.Errorf("a mount point that is the directory itself is not inside it: %q", got)
	}
	if got := MountsInside([]byte(sampleMountinfo), "/srv/stage/a b", true); !slices.Equal(got, []string{"/srv/stage/a b"}) {
		t.Errorf("with self, the mount at the directory itself: %q", got)
	}
	if got := MountsInside([]byte(sampleMountinfo), "/", false); len(got) != 8 {
		t.Errorf("under /: %q", got)
	}
	var many strings.Builder
	for range MaxMounts + 5 {
		many.WriteString("40 22 0:50 / /w/x rw - tmpfs tmpfs rw\n")
	}
	if got := MountsInside([]byte(many.String()), "/w", false); len(got) != MaxMounts {
		t.Errorf("%d mount points, want at most %d", len(got), MaxMounts)
	}
}

// awks returns the awk implementations installed here.
func awks(t *testing.T) [][]string {
	var out [][]string
	for _, a := range [][]string{{"awk"}, {"mawk"}, {"gawk"}, {"original-awk"}, {"nawk"}, {"busybox", "awk"}} {
		if _, err := exec.LookPath(a[0]); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		t.Fatal("no awk installed")
	}
	return out
}

// runMountsAwk runs mountsAwk with awk over info, for dir; it returns the
// decoded mount points it printed and whether it exited 1.
func runMountsAwk(t *testing.T, awk []string, info, dir string, self bool) ([]string, bool) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(awk[0], append(awk[1:], mountsAwk, f)...)
	cmd.Env = append(os.Environ(), "P="+dir, "S=")
	if self {
		cmd.Env[len(cmd.Env)-1] = "S=1"
	}
	out, err := cmd.Output()
	found := false
	if err != nil {
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%v: %v", awk, err)
		}
		found = true
	}
	var got []string
	for l := range strings.SplitSeq(strings.TrimSuffix(string(out), "\n"), "\n") {
		if l != "" {
			got = append(got, unescapeMount(l))
		}
	}
	return got, found
}

// TestMountsAwkAgrees: the sandbox's check (mountsAwk, under every awk
// installed) finds what MountsInside finds, and fails exactly when it
// finds one.
func TestMountsAwkAgrees(t *testing.T) {
	for _, awk := range awks(t) {
		t.Run(strings.Join(awk, " "), func(t *testing.T) {
			for _, info := range []string{sampleMountinfo, shownMountinfo} {
				for _, dir := range []string{"/srv/stage/a", "/srv/stage/a b", "/srv/stage", "/", "/nowhere", "/other/a", "/other/a/scripts", "/srv/stage/b", "/mnt"} {
					for _, self := range []bool{false, true} {
						want := MountsInside([]byte(info), dir, self)
						got, found := runMountsAwk(t, awk, info, dir, self)
						if !slices.Equal(got, want) || found != (len(want) > 0) {
							t.Errorf("%s (self %v): awk found %q (failed: %v), MountsInside %q", dir, self, got, found, want)
						}
					}
				}
			}
		})
	}
}

// runMountsSh runs Ms (mountsShFunc) under sh over info, for dir; it
// returns the decoded mount points it printed and its exit status.
func runMountsSh(t *testing.T, sh []string, info, dir string, self bool) ([]string, int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	selfArg := ""
	if self {
		selfArg = "1"
	}
	cmd := exec.Command(sh[0], append(sh[1:], "-c", mountsShFunc+`Ms "$1" "$2" "$3"`, "sh", dir, selfArg, f)...)
	out, err := cmd.Output()
	status := 0
	if err != nil {
		ee := (*exec.ExitError)(nil)
		if !errors.As(err, &ee) {
			t.Fatalf("%v: %v", sh, err)
		}
		status = ee.ExitCode()
	}
	var got []string
	for l := range strings.SplitSeq(strings.TrimSuffix(string(out), "\n"), "\n") {
		if l != "" {
			got = append(got, unescapeMount(l))
		}
	}
	return got, status
}

// mountDirs are the directories the mount checks are compared on.
var mountDirs = []string{"/srv/stage/a", "/srv/stage/a b", "/srv/stage", "/", "/nowhere", "/other/a", "/other/a/scripts", "/srv/stage/b", "/mnt", "/again", "/srv"}

// TestMountsShAgrees: the sh check for a sandbox without awk (Ms) finds
// what MountsInside finds, under every shell, and fails exactly when it
// finds one; for a directory whose name it cannot compare escaped (a
// space, tab, newline or backslash in it) it says it cannot tell (2).
func TestMountsShAgrees(t *testing.T) {
	for _, sh := range shells {
		if _, err := exec.LookPath(sh.argv[0]); err != nil {
			t.Logf("%s is not installed (Debian: apt-get install dash busybox-static): not tested under it", sh.argv[0])
			continue
		}
		t.Run(sh.name, func(t *testing.T) {
			for _, info := range []string{sampleMountinfo, shownMountinfo, strings.TrimSuffix(shownMountinfo, "\n"), "1 2 8:1 / /\n2 1 8:1 /a\134b /x\040y\n3 1 8:1 /srv/stage /s\n"} {
				for _, dir := range append(mountDirs, "/s/a", "/x y", `/a\b`, "/x\ty", "/x\ny") {
					for _, self := range []bool{false, true} {
						got, status := runMountsSh(t, sh.argv, info, dir, self)
						if strings.ContainsAny(dir, " \t\n\\") {
							if status != 2 || len(got) > 0 {
								t.Errorf("%q (self %v): status %d, printed %q; want 2 and nothing", dir, self, status, got)
							}
							continue
						}
						want := MountsInside([]byte(info), dir, self)
						if !slices.Equal(got, want) || status != map[bool]int{false: 0, true: 1}[len(want) > 0] {
							t.Errorf("%s (self %v): sh found %q (status %d), MountsInside %q", dir, self, got, status, want)
						}
					}
				}
			}
		})
	}
}

// FuzzMountsShAgrees: on any mountinfo, Ms (under sh) and MountsInside
// agree on a directory Ms can compare.
func FuzzMountsShAgrees(f *testing.F) {
	f.Add(sampleMountinfo, "/srv/stage/a", false)
	f.Add(shownMountinfo, "/other/a", true)
	f.Add("1 2 3 /a\\040 /b\n1 2 3 /a /c\n", "/b", false)
	f.Fuzz(func(t *testing.T, info, dir string, self bool) {
		if !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, " \t\n\\\x00") || strings.ContainsRune(info, 0) || strings.Contains(dir, "//") {
			return
		}
		if dir != "/" && (strings.HasSuffix(dir, "/") || strings.Contains(dir, "/./") || strings.Contains(dir, "/../")) {
			return // Mi is given a clean physical path (pwd -P)
		}
		got, status := runMountsSh(t, []string{"sh"}, info, dir, self)
		want := MountsInside([]byte(info), dir, self)
		if !slices.Equal(got, want) || status != map[bool]int{false: 0, true: 1}[len(want) > 0] {
			t.Fatalf("%q in %q (self %v): sh found %q (status %d), MountsInside %q", dir, info, self, got, status, want)
		}
	})
}

// TestMountsFuncRuns: Mi reads this machine's /proc/self/mountinfo under
// every shell: nothing is mounted inside a fresh directory, and /
// (nearly always) holds a mount point.
func TestMountsFuncRuns(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo here (not Linux): Mi prints nothing")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, sh := range shells {
		if _, err := exec.LookPath(sh.argv[0]); err != nil {
			t.Logf("%s is not installed (Debian: apt-get install dash busybox-static): not tested under it", sh.argv[0])
			continue
		}
		for _, d := range []string{dir, "/"} {
			cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", mountsFunc+`Mi "$1"`, "sh", d)...)
			var out bytes.Buffer
			cmd.Stdout = &out
			err := cmd.Run()
			want := MountsInside(info, d, false)
			if (err != nil) != (len(want) > 0) {
				t.Errorf("%s on %s: %v, want %d mount points (%q)", sh.name, d, err, len(want), out.String())
			}
		}
	}
}

// FuzzMountsInside: whatever the mountinfo holds, every mount point found
// is a line's mount point decoded, and either strictly inside the
// directory or of a mount of the directory's own file system; at most
// MaxMounts.
func FuzzMountsInside(f *testing.F) {
	f.Add([]byte(sampleMountinfo), "/srv/stage/a")
	f.Add([]byte(shownMountinfo), "/other/a")
	f.Add([]byte("1 2 3 4 /a\\040b/c\n1 2 3 4 /a\\040b\n"), "/a b")
	f.Add([]byte("1 2 3 4 /x\\134\\134y/z\n"), `/x\\y`)
	f.Fuzz(func(t *testing.T, info []byte, dir string) {
		got := MountsInside(info, dir, false)
		if self := MountsInside(info, dir, true); len(self) < len(got) {
			t.Fatalf("with self %q, without %q", self, got)
		}
		if len(got) > MaxMounts {
			t.Fatalf("%d mount points", len(got))
		}
		points, lines := map[string]bool{}, 0
		for l := range strings.SplitSeq(string(info), "\n") {
			if f := strings.Fields(l); len(f) >= 5 {
				points[unescapeMount(f[4])] = true
				lines++
			}
		}
		p := dir
		if p != "/" {
			p += "/"
		}
		for _, m := range got {
			if !points[m] {
				t.Fatalf("%q is not a mount point of the input", m)
			}
			if !strings.HasPrefix(m, p) && lines < 2 {
				t.Fatalf("%q, not inside %q, reported with a single mount in the input", m, dir)
			}
		}
	})
}
