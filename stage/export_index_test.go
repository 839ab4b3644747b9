package stage

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/tree"
)

// IndexRecordPath returns the file a persistent index keeps a's record in
// (a.Source must be clean, as Stage makes it).
func IndexRecordPath(ix *Index, a Asset) string { return ix.path(indexKey(a)) }

// IndexStampsPath is the file that holds a's stamps in ix's directory.
func IndexStampsPath(ix *Index, a Asset) string { return ix.stampsPath(indexKey(a)) }

// SetIndexFileFiles rewrites every record file of ix's directory so that it
// remembers files regular files, so that a test can tell a hit served from
// the directory (by a new Index, a "new process") from a walk.
func SetIndexFileFiles(ix *Index, files int) error {
	names, err := filepath.Glob(filepath.Join(ix.dir, "index-v1-*.json"))
	if err != nil {
		return err
	}
	for _, p := range names {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var w wireIndexRecord
		if err := json.Unmarshal(data, &w); err != nil {
			return err
		}
		w.Files = files
		if data, err = json.Marshal(w); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// IndexStoreSum stores, for a, a record whose fingerprint is 32 bytes of
// sum and which remembers files files.
func IndexStoreSum(ix *Index, a Asset, sum byte, files int) {
	ix.store(indexKey(a), sumMetadata(sum), StagedAsset{Digest: digest.Of([]byte{sum}), Files: files, Skipped: []string{"l", "\xff"}})
}

// IndexLookupSum looks a up under the fingerprint of 32 bytes of sum.
func IndexLookupSum(ix *Index, a Asset, sum byte) (files int, digest string, skipped []string, ok bool) {
	rec, ok, _ := ix.lookup(indexKey(a), sumMetadata(sum))
	return rec.files, rec.digest, rec.skipped, ok
}

// IndexForgetSum stores an unusable fingerprint for a.
func IndexForgetSum(ix *Index, a Asset) { ix.store(indexKey(a), tree.Metadata{}, StagedAsset{}) }

func sumMetadata(sum byte) tree.Metadata {
	m := tree.Metadata{Usable: true}
	for i := range m.Sum {
		m.Sum[i] = sum
	}
	return m
}

// RoundTripIndexRecord decodes data as key's record and encodes it again.
func RoundTripIndexRecord(data []byte, key string) ([]byte, error) {
	rec, err := decodeIndexRecord(data, key)
	if err != nil {
		return nil, err
	}
	return encodeIndexRecord(key, rec)
}

// EncodeIndexRecord encodes a record of key.
func EncodeIndexRecord(key string, sum byte, digest string, files int, bytes int64, skipped []string) ([]byte, error) {
	return encodeIndexRecord(key, indexRecord{sum: sumMetadata(sum).Sum, digest: digest, files: files, bytes: bytes, skipped: skipped})
}
