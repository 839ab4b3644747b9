package deliverable

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

var (
	_ WorkProducts        = (*FileStore)(nil)
	_ WorkProductRecorder = (*FileStore)(nil)
)

type workProductRecord struct {
	Version     int         `json:"version"`
	WorkProduct WorkProduct `json:"workProduct"`
}

func (s *FileStore) workProductPath(id string) string {
	return filepath.Join(s.dir, "workproducts", id+".json")
}

// RecordWorkProduct implements WorkProductRecorder: it keeps a
// workspace_file work product (artifacts are recorded by Put) in
// workproducts/<id>.json and then in its run file, the commit point. The
// same work product recorded again is a no-op; another one under a used id
// is an error wrapping ErrIdempotencyConflict.
func (s *FileStore) RecordWorkProduct(ctx context.Context, wp WorkProduct) error {
	if wp.Type != WorkProductWorkspaceFile {
		return fmt.Errorf("%w: RecordWorkProduct records %q work products; %q ones are recorded by Put", ErrInvalidRequest, WorkProductWorkspaceFile, WorkProductArtifact)
	}
	ref, err := wp.WorkspaceRef()
	if err != nil {
		return err
	}
	want, err := WorkspaceFileWorkProduct(wp.ID, wp.TaskID, wp.RunID, wp.Title, ref)
	if err != nil {
		return err
	}
	if string(want.Metadata) != string(wp.Metadata) || want.ID != wp.ID || want.Title != wp.Title {
		return fmt.Errorf("%w: work product %s is not canonical; make it with WorkspaceFileWorkProduct", ErrInvalidRequest, clip(wp.ID))
	}
	unlock, err := s.runs.Lock(ctx, s.runPath(wp.TaskID, wp.RunID))
	if err != nil {
		return err
	}
	defer unlock()
	unlockStore, err := s.lockStore(ctx) // the run file is shared with other processes
	if err != nil {
		return err
	}
	defer unlockStore()
	run, err := s.readRun(wp.TaskID, wp.RunID)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(run.WorkProducts, func(w WorkProduct) bool { return w.ID == wp.ID }); i >= 0 {
		if sameWorkProduct(run.WorkProducts[i], wp) {
			return nil
		}
		return fmt.Errorf("%w: work product id %s is already used by another work product of this run", ErrIdempotencyConflict, wp.ID)
	}
	record := s.workProductPath(wp.ID)
	if _, err := s.fs.Stat(record); err == nil {
		return fmt.Errorf("%w: work product id %s is already used", ErrIdempotencyConflict, wp.ID)
	}
	if err := s.writeJSON(ctx, record, workProductRecord{Version: fileStoreVersion, WorkProduct: wp}); err != nil {
		return err
	}
	run.WorkProducts = append(run.WorkProducts, wp)
	if err := s.writeJSON(ctx, s.runPath(wp.TaskID, wp.RunID), run); err != nil {
		if rerr := s.fs.Remove(record); rerr != nil {
			return errors.Join(err, fmt.Errorf("deliverable: undo: remove work product record %s: %w (no run names it; it is garbage and may be deleted)", record, rerr))
		}
		return err
	}
	return nil
}

func sameWorkProduct(a, b WorkProduct) bool {
	return a.ID == b.ID && a.Type == b.Type && a.Provider == b.Provider && a.TaskID == b.TaskID &&
		a.RunID == b.RunID && a.Title == b.Title && string(a.Metadata) == string(b.Metadata)
}

// WorkProduct implements WorkProducts: an artifact's work product (its id
// is its attachment's) or a recorded workspace_file one; an unknown id
// wraps ErrNotFound. A host whose Tasks delegates to it lets
// ValidateEvidence judge "work_product:<id>" citations.
func (s *FileStore) WorkProduct(ctx context.Context, id string) (WorkProduct, error) {
	if err := ctx.Err(); err != nil {
		return WorkProduct{}, err
	}
	canon, ok := parseUUID(id)
	if !ok {
		return WorkProduct{}, fmt.Errorf("%w: %q is not a work product id", ErrNotFound, clip(id))
	}
	a, err := s.Attachment(ctx, canon)
	if err == nil {
		return ArtifactWorkProduct(a), nil
	}
	if !errors.Is(err, ErrNotFound) {
		return WorkProduct{}, err
	}
	var rec workProductRecord
	if err := s.readJSON(s.workProductPath(canon), &rec); err != nil {
		if errors.Is(err, ErrNotFound) {
			return WorkProduct{}, fmt.Errorf("%w: work product %s", ErrNotFound, canon)
		}
		return WorkProduct{}, err
	}
	if rec.Version != fileStoreVersion || rec.WorkProduct.ID != canon {
		return WorkProduct{}, fmt.Errorf("deliverable: work product record %s has version %d and id %q; the store file is damaged", s.workProductPath(canon), rec.Version, clip(rec.WorkProduct.ID))
	}
	// Committed only once its run file lists it.
	run, err := s.readRun(rec.WorkProduct.TaskID, rec.WorkProduct.RunID)
	if err != nil {
		return WorkProduct{}, err
	}
	if !slices.ContainsFunc(run.WorkProducts, func(w WorkProduct) bool { return sameWorkProduct(w, rec.WorkProduct) }) {
		return WorkProduct{}, fmt.Errorf("%w: work product %s (its run does not list it)", ErrNotFound, canon)
	}
	return rec.WorkProduct, nil
}
