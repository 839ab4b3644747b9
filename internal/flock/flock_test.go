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
