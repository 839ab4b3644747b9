package deliverable_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spf13/afero"

	"github.com/airlockdev/airlock/deliverable"
)

// benchRegisterMiB is the size of BenchmarkRegister's file in MiB: 256, or
// AIRLOCK_BENCH_REGISTER_MIB (1024 for the 1 GiB target).
func benchRegisterMiB(b *testing.B) int64 {
	s := os.Getenv("AIRLOCK_BENCH_REGISTER_MIB")
	if s == "" {
		return 256
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		b.Fatalf("AIRLOCK_BENCH_REGISTER_MIB=%q: want a positive number of MiB", s)
	}
	return n
}

// BenchmarkRegister registers one large file from a LocalWorkspace into a
// FileStore on the OS file system (a new run each time, so the store writes,
// syncs and checks a new copy, which replaces the published blob). Compare its
// MB/s with `openssl dgst -sha256` on a file of the same size.
func BenchmarkRegister(b *testing.B) {
	mib := benchRegisterMiB(b)
	size := mib << 20
	ws, storeDir := b.TempDir(), b.TempDir()
	p := filepath.Join(ws, "big.bin")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
	if err != nil {
		b.Fatal(err)
	}
	reg := &deliverable.Registrar{Store: store, MaxBytes: size}
	w, err := deliverable.LocalWorkspace(ws)
	if err != nil {
		b.Fatal(err)
	}
	req := deliverable.Request{
		ContentRef: "big.bin", Filename: "big.bin", ContentType: "application/octet-stream",
		ByteSize: size, SHA256: hex.EncodeToString(h.Sum(nil)), Title: "Big", IdempotencyKey: "k",
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rc, err := reg.Register(b.Context(), w, "t", fmt.Sprintf("run-%d", i), req)
		if err != nil {
			b.Fatal(err)
		}
		if rc.Disposition != deliverable.Applied {
			b.Fatalf("disposition %s, want applied", rc.Disposition)
		}
	}
}
