// Command adapter is the code an adapter author copies: one agent run in a
// real SSH sandbox, every error sorted into what to do next.
//
//	go run ./examples/adapter -ssh ALIAS \
//		[-workspace DIR] [-remote-dir DIR] [-skill DIR]... [-state DIR] [-objective TEXT]
//
// adapter.go is the whole run (Run.Do, 150 lines): skills.Materialize,
// stage.Stage of the bundle under <remote>/.airlock, the prompt rewritten
// onto the sandbox, session.Bind with a resume of the saved record (or a
// fresh session when it drifted), the register_deliverable tool served
// over MCP inside the sandbox through the SSH connection
// (mcptool.ServeInSandbox over remote.Host; the agent gets its URL in Turn.ToolURL),
// workspace.Prepare, the agent (a placeholder hook: running Claude Code,
// Codex, … is out of scope),
// Round.Restore, then deliverable.Register of each file the agent delivered,
// read from the sandbox, and deliverable.ValidateEvidence of its completion.
// classify sorts any error into retry (whatever sandbox.Retryable says may
// be retried), start fresh, tell the agent, or host fault. main.go only parses flags and dials ALIAS
// as ssh would (remote.LoadSSHConfig: ~/.ssh/config, the agent,
// known_hosts, ProxyJump); the host key is always checked.
//
// adapter_test.go pins the link policy of the staging site with
// stagetest.ScanSites and runs Do against remotetest, the in-process SSH
// server.
package main
