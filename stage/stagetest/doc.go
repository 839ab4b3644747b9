// Package stagetest holds what adapter authors and target implementers
// test with: [TestTarget], the conformance suite every stage.Target passes
// (content, modes, awkward names, links left out, atomic replacement, reuse,
// cancellation, concurrency) which also plays the attacker (a source
// directory swapped for a link while a stage runs; with [WithSandboxShell],
// links planted at the root, at the asset path and inside a published
// copy); [TestRunner], the conformance suite every sandbox.Runner passes
// (exit status and signals, Env delivered and never in argv, invalid Env
// keys refused, working directory, stdin, stdout and stderr beyond a pipe
// buffer, prompt cancellation that leaves no process behind); and
// [ScanSites], which lists every stage.Asset literal in a source tree with
// its link policy so a test can pin the reviewed policy at each staging
// site.
//
// The package asserts with plain testing: running its suites adds no test
// library to a module's dependencies.
package stagetest
