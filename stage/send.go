package stage

import "github.com/airlockdev/airlock/internal/shell"

// One publish over a shell target runs two sandbox commands: the send
// command (setup, carry, transfer) and the publish (a control operation);
// phases.go runs them, and internal/shell holds their scripts
// (shell.SendScript, shell.CarryScript, shell.PublishScript,
// shell.CleanupScript), the lines they print (shell.ReadyLine,
// shell.CarriedLine, shell.PublishedLine) and their parser (shell.Report).
// The host waits for shell.ReadyLine under the control deadline, exactly
// as it waited for the separate setup command it replaces, so a sandbox
// that never answers is still a transport failure within the deadline;
// once the directory exists the command is a data command, bounded by the
// caller's context only.

// maxEmbeddedCarry bounds the carry part of a send command's script (the
// quoted names of the unchanged files). A longer list is carried by a
// command of its own, which reads its script on stdin, while the send
// command waits for the stream.
var maxEmbeddedCarry = 64 << 10 // a variable so that tests can lower it

// planCarry plans carrying the unchanged files (shell.PlanCarry).
func planCarry(files []UnchangedFile) shell.CarryPlan {
	cf := make([]shell.CarryFile, len(files))
	for i, f := range files {
		cf[i] = shell.CarryFile{Path: f.Path, Mode: f.Mode, Size: f.Size, SHA256: f.SHA256}
	}
	return shell.PlanCarry(cf)
}
