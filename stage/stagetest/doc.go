// Package stagetest holds what adapter authors and target implementers
// test with: [TestTarget], the conformance suite every stage.Target passes
// (content, modes, awkward names, links left out, atomic replacement, reuse,
// cancellation, concurrency), and [ScanSites], which lists every stage.Asset
// literal in a source tree with its link policy so a test can pin the
// reviewed policy at each staging site.
package stagetest
