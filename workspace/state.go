package workspace

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockdev/airlock/internal/atomicfile"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
)

// recordSchema names the one format of a round's state file.
const recordSchema = "airlock.workspace-round.v1"

const (
	kindGit   = "git"
	kindPlain = "plain"
)

// record is a round's saved state: <state dir>/<id>.json. A plain round
// also keeps its baseline manifest at <id>.manifest.json.
type record struct {
	Schema  string   `json:"schema"`
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`     // kindGit or kindPlain
	Local   string   `json:"local"`    // Spec.Local
	Remote  string   `json:"remote"`   // Spec.Remote
	Exclude []string `json:"exclude"`  // Spec.Exclude
	Branch  string   `json:"branch"`   // refs/heads/…, "" for a detached HEAD
	Head    string   `json:"head"`     // the commit the sandbox got as HEAD, "" when unborn
	Snap    string   `json:"snapshot"` // the work tree snapshot commit
	Tree    string   `json:"tree"`     // its tree: the baseline
	Index   string   `json:"index"`    // the tree of the user's index
	// After a Restore, the baseline of the next one: the trees of the
	// work tree and of the index as the host now holds the sandbox's
	// work (see rebase.go); "" until a Restore moved them. Tree and Index
	// stay what the sandbox was given: its restore script compares its
	// index with Index.
	BaseTree  string `json:"base_tree,omitempty"`
	BaseIndex string `json:"base_index,omitempty"`
	// Links are the symbolic links of a plain round's baseline, which its
	// manifest cannot list: links a Restore brought, one "SHA256 PATH"
	// each (the SHA-256 of the target, the path in hex, as its bytes need
	// not be UTF-8), sorted.
	Links []string `json:"links,omitempty"`
	// Marked reports a plain round whose Prepare wrote its id in the
	// sandbox (shell.RoundMarker), which its Restore then requires; a
	// round prepared before markers existed has none.
	Marked bool `json:"marked,omitempty"`
}

func (r record) encode() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		panic(fmt.Sprintf("workspace: encoding round state: %v", err)) // strings only
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// decodeRecord accepts exactly what encode writes: unknown, missing or
// duplicate keys, another order, white space and trailing data are all
// rejected, as are bad ids, kinds and object names.
func decodeRecord(data []byte) (record, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r record
	if err := dec.Decode(&r); err != nil {
		return record{}, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	if !bytes.Equal(r.encode(), data) {
		return record{}, fmt.Errorf("%w: not in canonical form (missing, duplicate or reordered keys, or trailing data)", ErrBadState)
	}
	switch {
	case r.Schema != recordSchema:
		return record{}, fmt.Errorf("%w: schema %q, want %q", ErrBadState, r.Schema, recordSchema)
	case !validID(r.ID):
		return record{}, fmt.Errorf("%w: bad id %q", ErrBadState, r.ID)
	case r.Kind != kindGit && r.Kind != kindPlain:
		return record{}, fmt.Errorf("%w: unknown kind %q", ErrBadState, r.Kind)
	case r.Exclude == nil:
		return record{}, fmt.Errorf("%w: exclude is null", ErrBadState)
	}
	if r.Kind == kindGit {
		for _, h := range []string{r.Snap, r.Tree, r.Index} {
			if !shell.IsObjectName(h) {
				return record{}, fmt.Errorf("%w: bad object name %q", ErrBadState, h)
			}
		}
		for _, h := range []string{r.Head, r.BaseTree, r.BaseIndex} {
			if h != "" && !shell.IsObjectName(h) {
				return record{}, fmt.Errorf("%w: bad object name %q", ErrBadState, h)
			}
		}
	} else if r.BaseTree != "" || r.BaseIndex != "" {
		return record{}, fmt.Errorf("%w: a plain round with a git baseline", ErrBadState)
	}
	if r.Marked && r.Kind != kindPlain {
		return record{}, fmt.Errorf("%w: a git round marked as a plain one", ErrBadState)
	}
	if len(r.Links) > 0 && r.Kind != kindPlain {
		return record{}, fmt.Errorf("%w: a git round with links of a plain baseline", ErrBadState)
	}
	for i, l := range r.Links {
		if _, _, err := parseLink(l); err != nil {
			return record{}, fmt.Errorf("%w: link %q: %v", ErrBadState, l, err)
		}
		if i > 0 && r.Links[i-1] >= l {
			return record{}, fmt.Errorf("%w: links not sorted or repeated at %q", ErrBadState, l)
		}
	}
	return r, nil
}

// parseLink reads a record's link, "SHA256 PATH" (the path in hex).
func parseLink(l string) (p, id string, err error) {
	id, hp, ok := strings.Cut(l, " ")
	raw, herr := hex.DecodeString(hp)
	switch {
	case !ok || len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "":
		return "", "", errors.New("not a lowercase SHA-256 and a path")
	case herr != nil || hp != hex.EncodeToString(raw) || !tree.ValidPath(string(raw)):
		return "", "", errors.New("not a clean relative path in lowercase hex")
	}
	return string(raw), id, nil
}

// formatLink is parseLink's inverse.
func formatLink(p, id string) string { return id + " " + hex.EncodeToString([]byte(p)) }

func (r *Round) saveState(ctx context.Context) error {
	base := &r.base
	if r.rec.Kind != kindPlain {
		base = nil
	}
	return r.saveRecord(ctx, "workspace.Prepare", r.rec, base)
}

// saveRecord writes rec into the state directory, and base (a plain
// round's manifest, nil for none) before it, each atomically; op names
// the call in an error.
func (r *Round) saveRecord(ctx context.Context, op string, rec record, base *tree.Manifest) error {
	if r.state == "" {
		return nil
	}
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		return &fs.PathError{Op: op, Path: r.state, Err: fmt.Errorf("creating the state directory: %w", err)}
	}
	if base != nil {
		p := filepath.Join(r.state, rec.ID+".manifest.json")
		if err := atomicfile.WriteFileNamed(ctx, p, tmpBase(), base.Canonical(), 0o600); err != nil {
			return &fs.PathError{Op: op, Path: p, Err: err}
		}
	}
	p := filepath.Join(r.state, rec.ID+".json")
	if err := atomicfile.WriteFileNamed(ctx, p, tmpBase(), rec.encode(), 0o600); err != nil {
		return &fs.PathError{Op: op, Path: p, Err: err}
	}
	return nil
}

func (r *Round) dropState() {
	if r.state == "" {
		return
	}
	os.Remove(filepath.Join(r.state, r.rec.ID+".json"))
	os.Remove(filepath.Join(r.state, r.rec.ID+".manifest.json"))
}

// maxStateBytes bounds a state file read back.
const maxStateBytes = 256 << 20

func readState(dir, name string) ([]byte, error) {
	f, err := tree.OpenFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: filepath.Join(dir, name), Err: err}
	}
	if len(data) > maxStateBytes {
		return nil, &fs.PathError{Op: "read", Path: filepath.Join(dir, name), Err: fmt.Errorf("%w: larger than %d bytes", ErrBadState, maxStateBytes)}
	}
	return data, nil
}

func loadState(dir, id string) (record, tree.Manifest, error) {
	data, err := readState(dir, id+".json")
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, tree.Manifest{}, &fs.PathError{Op: "workspace.Reopen", Path: filepath.Join(dir, id+".json"),
			Err: fmt.Errorf("%w: no state for round %s; pass the WithStateDir the round was prepared with", ErrNoRound, id)}
	}
	if err != nil {
		return record{}, tree.Manifest{}, err
	}
	rec, err := decodeRecord(data)
	if err == nil && rec.ID != id {
		err = fmt.Errorf("%w: the file holds round %s", ErrBadState, rec.ID)
	}
	if err != nil {
		err = fmt.Errorf("%w; the round cannot be reopened from this file, and the agent's work is still in the sandbox: copy what you need from there by hand before a new Prepare (which replaces it), or put back a good copy of the file", err)
		return record{}, tree.Manifest{}, &fs.PathError{Op: "workspace.Reopen", Path: filepath.Join(dir, id+".json"), Err: err}
	}
	var m tree.Manifest
	if rec.Kind == kindPlain {
		p := id + ".manifest.json"
		data, err := readState(dir, p)
		if err != nil {
			return record{}, tree.Manifest{}, err
		}
		if m, err = tree.ParseManifest(data); err != nil {
			return record{}, tree.Manifest{}, &fs.PathError{Op: "workspace.Reopen", Path: filepath.Join(dir, p), Err: fmt.Errorf("%w: %w", ErrBadState, err)}
		}
	}
	return rec, m, nil
}
