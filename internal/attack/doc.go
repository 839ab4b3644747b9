// Package attack holds airlock's permanent attack suite (issue 18): tests,
// no library code. They attack the public API of stage, stage/remote,
// workspace and deliverable from outside, the way a hostile sandbox, a
// broken network or an overloaded host would, and check the promises that
// matter most: nothing lost, nothing half-written, nothing escapes, every
// failure retryable and reported as what it is.
//
//   - faults_test.go: a fault-injecting proxy (internal/faultnet) cuts or
//     stalls the SSH connection after N bytes, with N swept over every
//     phase of Stage, Unstage, workspace.Prepare, Round.Restore and a
//     remote deliverable Register, over remotetest and a real sshd. After
//     each fault: the error wraps sandbox.ErrTransport, the old state is
//     intact, a retry on a new connection succeeds and leaves nothing
//     behind. AIRLOCK_FAULT_SWEEP=full sweeps every byte-boundary class;
//     the default is a bounded sweep for CI.
//   - load_test.go: many sandboxes and round trips from one process at
//     once; no goroutine or descriptor leak; BenchmarkConcurrentStage50
//     reports peak RSS.
//
// The package's tests are its only content; its (empty) non-test package
// exists so that `go vet` and `go test` find the directory.
package attack
