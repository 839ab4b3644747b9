// Command quickstart runs airlock's main job end to end on this machine, in
// a throwaway directory, with no setup and no network:
//
//  1. materialize two selected skills (one of them unusable) into an owned
//     bundle, leaving out a planted link to a host secret;
//  2. stage the bundle into a sandbox through the command-only bridge (a
//     local sh here; the in-process SSH sandbox arrives with stage/remote)
//     and rewrite the prompt onto the sandbox path; stage again unchanged;
//  3. bind a durable session, persist its v1 record, and refuse a resume
//     under another model;
//  4. let the "agent" write a report in the workspace, register it as a
//     verified deliverable, and validate the completion's evidence.
//
// Every line it prints is checked by the code that prints it.
package main
