package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTryAndWait: a second open file cannot take a held lock, Wait ends
// with ctx, and the lock is free again once its holder's file is closed.
func TestTryAndWait(t *testing.T) {
	if !Supported {
		t.Skip("no flock(2) on this platform")
	}
	p := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|NoFollow, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := open(), open()
	defer b.Close()
	if ok, err := Try(a); !ok || err != nil {
		t.Fatalf("first Try: %v %v", ok, err)
	}
	if ok, err := Try(b); ok || err != nil {
		t.Fatalf("second Try while held: %v %v, want false, nil", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while held: %v, want the context's deadline", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Wait(context.Background(), b); err != nil {
		t.Fatalf("Wait once the holder closed: %v", err)
	}
}

func TestRandPart(t *testing.T) {
	for s, want := range map[string]bool{"ABCDEFGHIJKLMNOP": true, "ABCDEFGHIJKLMN27": true, "ABCDEFGHIJKLMNO": false,
		"abcdefghijklmnop": false, "ABCDEFGHIJKLMN18": false, "ABCDEFGHIJKLMNOPQ": false} {
		if got := RandPart(s, 16); got != want {
			t.Errorf("RandPart(%q, 16) = %v, want %v", s, got, want)
		}
	}
}

// TestClaimAndRemoveIfFree: a claimed name is kept while its holder's
// file is open and removed once it is closed; a link is never followed.
func TestClaimAndRemoveIfFree(t *testing.T) {
	if !Supported {
		t.Skip("no flock(2) on this platform")
	}
	dir := t.TempDir()
	fresh, name := filepath.Join(dir, ".new-x"), filepath.Join(dir, "work-x")
	f, err := os.OpenFile(fresh, os.O_RDWR|os.O_CREATE|os.O_EXCL|NoFollow, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := Claim(f, fresh, name); err != nil {
		t.Fatal(err)
	}
	RemoveIfFree(name, os.Remove)
	if _, err := os.Lstat(name); err != nil {
		t.Fatalf("a held name was removed: %v", err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	RemoveIfFree(link, os.Remove)
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("a link was taken for a free lock: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	RemoveIfFree(name, os.Remove)
	if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a free name stayed: %v", err)
	}
}
