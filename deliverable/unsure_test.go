package deliverable_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// objRussian asks, in Russian, for a PDF report attached to the task: a
// language with no table, so the reading is unsure.
const objRussian = "Подготовь краткий отчёт о продажах за квартал и приложи его к задаче в виде PDF."

// TestDetectRequestsUnsure: a text in a language with no table is read
// with a reason for doubt; English and the tabled languages are read
// sure.
func TestDetectRequestsUnsure(t *testing.T) {
	r := deliverable.DetectRequests(objRussian)
	assert.Contains(t, r.Unsure, "language")
	assert.Contains(t, r.Unsure, "no table")
	for _, obj := range []string{objNamed, objUnnamed, objNone, "Bitte exportiere die Tabelle als umsatz.xlsx und hänge sie an."} {
		assert.Empty(t, deliverable.DetectRequests(obj).Unsure, obj)
	}
}

// TestValidateEvidenceUnsurePolicy: with the default policy an unsure
// reading is followed as read and the doubt logged with its reason; with
// UnsureRequireFile a completion without a registered file is refused,
// and one with a file of the run is accepted; a policy out of range is the
// host's error.
func TestValidateEvidenceUnsurePolicy(t *testing.T) {
	r := deliverable.DetectRequests(objRussian)
	require.NotEmpty(t, r.Unsure)

	var logged bytes.Buffer
	ev := deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objRussian, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	err := deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev)
	if r.File {
		require.ErrorIs(t, err, deliverable.ErrEvidence, "read as asking for a file")
	} else {
		require.NoError(t, err, "read as asking for none")
	}
	assert.Contains(t, logged.String(), "level=WARN")
	assert.Contains(t, logged.String(), "task=P")
	assert.Contains(t, logged.String(), "no table")

	ev.Unsure, ev.Logger = deliverable.UnsureRequireFile, nil
	err = deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev)
	require.ErrorIs(t, err, deliverable.ErrEvidence)
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, []string{"a file"}, ee.Missing)
	assert.Contains(t, ee.Message, "could not be read with certainty")
	assert.Contains(t, ee.Message, r.Unsure)

	ev.Refs = []string{cite(idOwnOther)}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev), "a file of the run satisfies the policy")

	ev.Unsure = deliverable.UnsurePolicy(7)
	err = deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev)
	var he *deliverable.HostError
	require.ErrorAs(t, err, &he)
	assert.ErrorContains(t, err, "UnsurePolicy(7)")

	ev = deliverable.Evidence{TaskID: "P", RunID: "R", Objective: objNone, Unsure: deliverable.UnsureRequireFile}
	require.NoError(t, deliverable.ValidateEvidence(t.Context(), evidenceTasks(), ev), "a sure reading ignores the policy")
}
