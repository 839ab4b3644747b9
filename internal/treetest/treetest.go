package treetest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// NoLinkNoSecret fails t when any entry under dir is a symbolic link or any
// regular file under dir holds the bytes of secret. It reads dir with
// filepath.WalkDir, which never follows a link.
func NoLinkNoSecret(t testing.TB, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t.Errorf("%s is a symbolic link", p)
			return nil
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
}
