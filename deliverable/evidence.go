package deliverable

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
)

// Status is a task's state as the host records it.
type Status string

// Task statuses.
const (
	StatusTodo       Status = "todo"
	StatusInProgress Status = "in_progress"
	StatusBlocked    Status = "blocked"
	StatusDone       Status = "done"
	StatusCancelled  Status = "cancelled"
)

// Task is the part of a host task that ValidateEvidence reads.
type Task struct {
	ID       string // the task's id
	ParentID string // its parent task's id; "" for a top-level task
	Status   Status // its current status
}

// Tasks is provided by the host, or by FileStore.Tasks (a FileTasks, for a
// host with no task table of its own). Both methods return an error wrapping
// ErrNotFound for an unknown id; an error wrapping fs.ErrNotExist (what os,
// afero and many stores return for a missing file) is taken the same way.
// Any other error is treated as a host failure and returned, not as a
// rejected citation.
type Tasks interface {
	Task(ctx context.Context, id string) (Task, error)
	Attachment(ctx context.Context, id string) (Attachment, error)
}

// Locker is an optional interface of Tasks. When implemented, ValidateEvidence
// holds the lock for the whole check so that the rows it reads (a child task's
// status, the attachments) cannot change under it. A SQL host locks the rows
// FOR SHARE NOWAIT and returns an error wrapping ErrBusy when they are locked.
type Locker interface {
	Lock(ctx context.Context, taskIDs, attachmentIDs []string) (unlock func(), err error)
}

// Evidence is a completion report to check.
type Evidence struct {
	TaskID    string   // the task completing
	RunID     string   // the run completing it
	Objective string   // the task's own request text, bound by the host
	Refs      []string // what the completion report cites
	// ToolName is the name of the agent's registration tool, used in
	// rejection messages; "" means DefaultToolName.
	ToolName string
	// Unsure is what to do when DetectRequests is unsure of Objective
	// (Requests.Unsure): the zero value follows the reading and logs the
	// doubt; UnsureRequireFile requires a registered file.
	Unsure UnsurePolicy
	// Logger receives the warning of an unsure reading; nil means
	// slog.Default().
	Logger *slog.Logger
}

// maxCitations bounds the attachments one completion may cite, and so the
// rows one check reads and locks.
const maxCitations = 256

// RejectedCitationMessage is the message of every rejected citation under
// the default tool name; RejectedCitation returns it for another.
const RejectedCitationMessage = "Completion cites no registered attachment on this task or its completed child tasks. " +
	"Use " + DefaultToolName + " for the requested file and cite deliverable:<attachmentId> from its receipt."

// RejectedCitation returns the message of every rejected citation when the
// agent's registration tool is named tool ("" means DefaultToolName).
func RejectedCitation(tool string) string {
	return "Completion cites no registered attachment on this task or its completed child tasks. " +
		"Use " + toolName(tool) + " for the requested file and cite deliverable:<attachmentId> from its receipt."
}

// EvidenceError is the error ValidateEvidence returns when the evidence does
// not prove the delivery. Message is written for the agent: it says what to
// do. It wraps a *RequestError with the same Message, which wraps
// ErrEvidence, so a host that shows every *RequestError's Message to the
// agent handles Register and ValidateEvidence alike.
type EvidenceError struct {
	Ref          string   // the offending reference, if one
	AttachmentID string   // the attachment it cites, if any
	Missing      []string // requested files not delivered ("a file" when none is named)
	Message      string   // what to do
	Detail       string   // why, for this reference
}

// Error returns Message, exactly: hosts show it to the agent as it is. The
// reason for this particular reference is in Detail.
func (e *EvidenceError) Error() string { return e.Message }

// Unwrap returns a *RequestError with the same Message wrapping ErrEvidence.
func (e *EvidenceError) Unwrap() error { return &RequestError{Message: e.Message, Err: ErrEvidence} }

// ValidateEvidence checks that a completion report's citations prove the
// delivery of task ev.TaskID in run ev.RunID.
//
// A citation ("deliverable:<id>" or "/api/attachments/<id>/content", see
// ParseCitation) is accepted when its attachment is on ev.TaskID, or on a task
// whose ParentID is ev.TaskID and whose status is done. Any other cited
// attachment (a grandchild's, a child's not done, an unrelated task's, an
// unknown id) is rejected. A ref that names a workspace file instead of
// citing an attachment is rejected too; other refs (URLs, prose,
// "work_product:…") are ignored.
//
// When DetectRequests(ev.Objective) asks for a file, the citations must
// include an attachment on ev.TaskID registered in ev.RunID, and for every
// named file one with that file's base name, each file its own: the named
// files are matched to distinct cited files, so one attachment never
// covers two ("en/report.pdf" and "de/report.pdf" need two attachments
// named report.pdf). The attachments of one Attachment.ContentRef are one
// file (the same path registered again); an attachment whose ContentRef is
// a named path, or ends with it, is matched to that path first; a named
// path that another named path ends with ("report.pdf" beside
// "en/report.pdf") names that file again and needs nothing more. A child's
// attachment never satisfies this.
//
// When tasks implements WorkProducts, "work_product:<id>" citations are
// judged too: an artifact's as the citation of its attachment; a
// workspace_file work product of ev.TaskID is accepted as evidence when the
// objective asks for no file (a code fix), and never delivers a requested
// file (the rejection says it is a signpost, not an upload); an unknown
// work product, or a workspace file of another task, is rejected; the
// host's own kinds are not judged.
//
// When DetectRequests is unsure of ev.Objective (Requests.Unsure: a
// language it has no table for, conflicting signals), ev.Unsure decides:
// UnsureAsRead (the default) follows the reading and logs a warning with
// the reason to ev.Logger; UnsureRequireFile requires a file registered
// for the task in the run, and its rejection gives the reason.
//
// An empty ev.Objective asks for no file, except when tasks records each
// task's objective (FileTasks): the recorded one is then used, so that a
// host that forgot to pass it does not accept a completion with no file.
//
// Every rejection is an *EvidenceError wrapping ErrEvidence; its message
// names ev.ToolName. Every other failure is a *HostError: a nil tasks, an
// empty TaskID or RunID, a failing Tasks method (wrapped as it is), ctx.
// When tasks implements Locker the check runs under its lock; a lock error
// is returned wrapped (a busy lock wraps ErrBusy: retry).
func ValidateEvidence(ctx context.Context, tasks Tasks, ev Evidence) error {
	if tasks == nil {
		return &HostError{Op: "validate evidence", Err: errors.New("tasks is nil")}
	}
	for _, f := range []struct{ name, v string }{{"TaskID", ev.TaskID}, {"RunID", ev.RunID}} {
		if strings.TrimSpace(f.v) == "" {
			return &HostError{Op: "validate evidence", Err: fmt.Errorf("field %s of Evidence is empty", f.name)}
		}
	}
	if strings.TrimSpace(ev.Objective) == "" {
		if rec, ok := tasks.(objectiveRecorder); ok { // FileTasks: the recorded objective, never none
			r, err := rec.Record(ctx, ev.TaskID)
			if err != nil {
				return &HostError{Op: "validate evidence", Err: fmt.Errorf("reading task %q's objective: %w", ev.TaskID, err)}
			}
			ev.Objective = r.Objective
		}
	}
	ev, signposts, err := resolveWorkProducts(ctx, tasks, ev)
	if err != nil {
		return err
	}
	if err := validateEvidence(ctx, tasks, ev); err != nil {
		return hostErr("validate evidence", explainSignposts(err, signposts))
	}
	return nil
}

// objectiveRecorder is a Tasks that records each task's objective
// (FileTasks).
type objectiveRecorder interface {
	Record(ctx context.Context, id string) (TaskRecord, error)
}

func validateEvidence(ctx context.Context, tasks Tasks, ev Evidence) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tool := toolName(ev.ToolName)

	var ids []string
	for _, ref := range ev.Refs {
		id, shaped, ok := parseCitation(ref)
		switch {
		case ok:
			if slices.Contains(ids, id) {
				continue
			}
			if len(ids) == maxCitations {
				return &EvidenceError{Message: fmt.Sprintf(
					"Completion cites more than %d attachments; cite at most %d: the files the task asked for, each as deliverable:<attachmentId>.", maxCitations, maxCitations)}
			}
			ids = append(ids, id)
		case shaped:
			return &EvidenceError{Ref: ref, Message: RejectedCitation(tool),
				Detail: fmt.Sprintf("%q does not contain a valid attachment id", clip(ref))}
		case looksLikeLocalFile(ref):
			return &EvidenceError{Ref: ref, Message: fmt.Sprintf(
				"Completion cites %q, a workspace file, not a registered attachment. "+
					"Use %s for that file and cite deliverable:<attachmentId> from its receipt.", clip(ref), tool)}
		}
	}

	req := DetectRequests(ev.Objective)
	if req.Unsure != "" {
		switch ev.Unsure {
		case UnsureRequireFile:
			req.File = true
		case UnsureAsRead:
			log := ev.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Warn("deliverable: the task's text is read without certainty; following the reading", "task", ev.TaskID, "run", ev.RunID, "unsure", req.Unsure, "file", req.File, "files", req.Files)
		default:
			return &HostError{Op: "validate evidence", Err: fmt.Errorf("Evidence.Unsure is %v, not a policy; pass UnsureAsRead or UnsureRequireFile", ev.Unsure)}
		}
	}
	if len(ids) == 0 && !req.File && len(req.Files) == 0 {
		return nil
	}
	if len(ids) == 0 {
		return missingError(req, nil, ev)
	}

	locker, ok := tasks.(Locker)
	if !ok {
		return checkEvidence(ctx, tasks, ev, ids, req, nil)
	}
	// Learn which tasks own the cited attachments, lock those rows, then read
	// everything again under the lock.
	locked := []string{ev.TaskID}
	for _, id := range ids {
		a, err := tasks.Attachment(ctx, id)
		if isNotFound(err) {
			continue // rejected below, under the lock
		}
		if err != nil {
			return fmt.Errorf("deliverable: read attachment %s: %w", id, err)
		}
		if !slices.Contains(locked, a.TaskID) {
			locked = append(locked, a.TaskID)
		}
	}
	slices.Sort(locked)
	unlock, err := locker.Lock(ctx, locked, slices.Sorted(slices.Values(ids)))
	if err != nil {
		return fmt.Errorf("deliverable: lock tasks %q and attachments %q for the evidence check: %w", locked, ids, err)
	}
	if unlock != nil {
		defer unlock()
	}
	return checkEvidence(ctx, tasks, ev, ids, req, locked)
}

// isNotFound reports whether a Tasks method said the id is unknown: its
// error wraps ErrNotFound or fs.ErrNotExist.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}

// checkEvidence judges each cited attachment, then the requested files. When
// locked is not nil, an attachment owned by a task outside it means the rows
// changed between discovery and locking.
func checkEvidence(ctx context.Context, tasks Tasks, ev Evidence, ids []string, req Requests, locked []string) error {
	var own []Attachment // on ev.TaskID, registered in ev.RunID
	for _, id := range ids {
		ref := citationScheme + id
		reject := func(detail string) error {
			return &EvidenceError{Ref: ref, AttachmentID: id, Message: RejectedCitation(ev.ToolName), Detail: detail}
		}
		a, err := tasks.Attachment(ctx, id)
		if isNotFound(err) {
			return reject(fmt.Sprintf("%s: no such attachment", ref))
		}
		if err != nil {
			return fmt.Errorf("deliverable: read attachment %s: %w", id, err)
		}
		if !strings.EqualFold(a.ID, id) {
			return fmt.Errorf("deliverable: Tasks.Attachment(%s) returned attachment %q; the host's Tasks is faulty", id, clip(a.ID))
		}
		if locked != nil && !slices.Contains(locked, a.TaskID) {
			return fmt.Errorf("%w: attachment %s now belongs to task %q, which was not locked; retry the check", ErrBusy, id, clip(a.TaskID))
		}
		if a.TaskID == ev.TaskID {
			if a.RunID == ev.RunID {
				own = append(own, a)
			}
			continue
		}
		t, err := tasks.Task(ctx, a.TaskID)
		if isNotFound(err) {
			return reject(fmt.Sprintf("%s is on task %q, which does not exist", ref, clip(a.TaskID)))
		}
		if err != nil {
			return fmt.Errorf("deliverable: read task %q: %w", clip(a.TaskID), err)
		}
		switch {
		case t.ParentID != ev.TaskID:
			return reject(fmt.Sprintf("%s is on task %q, which is not a direct child of task %q", ref, clip(a.TaskID), clip(ev.TaskID)))
		case t.Status != StatusDone:
			return reject(fmt.Sprintf("%s is on child task %q, whose status is %q, not %q", ref, clip(a.TaskID), clip(string(t.Status)), StatusDone))
		}
	}
	return missingError(req, own, ev)
}

// missingError returns an *EvidenceError naming the requested files that own
// (attachments on the task from this run) does not cover, or nil.
func missingError(req Requests, own []Attachment, ev Evidence) error {
	missing := uncovered(req.Files, own)
	if len(req.Files) == 0 && req.File && len(own) == 0 {
		missing = append(missing, "a file")
	}
	if len(missing) == 0 {
		return nil
	}
	what, use := "a file", "the requested file"
	if len(req.Files) > 0 {
		what = strings.Join(missing, ", ")
		use = what
	}
	asks := "asks for " + what
	if req.Unsure != "" && ev.Unsure == UnsureRequireFile && len(req.Files) == 0 {
		asks = "may ask for a file (its text could not be read with certainty: " + req.Unsure + "; the host requires a file then)"
	}
	msg := fmt.Sprintf("The task %s, but the completion cites no attachment registered for it on this task in run %s; "+
		"a child task's file does not count. Use %s for %s and cite deliverable:<attachmentId> from its receipt.",
		asks, clip(ev.RunID), toolName(ev.ToolName), use)
	if sharesBaseName(missing, own) {
		msg += " Each requested file needs its own attachment: the one cited under that name covers another requested file."
	}
	return &EvidenceError{Missing: missing, Message: msg}
}

// sharesBaseName reports whether a missing file has the base name of a
// cited attachment: one that covers another requested file of that name.
func sharesBaseName(missing []string, own []Attachment) bool {
	for _, f := range missing {
		base := path.Base(requestPath(f))
		if slices.ContainsFunc(own, func(a Attachment) bool { return a.Filename == base }) {
			return true
		}
	}
	return false
}
