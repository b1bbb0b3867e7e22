"""The files that pass between processes, typed, each named and read/written in one
module (docs/architecture.md): server_ready.json (node -> benchmark). job.json is
launcher.contracts.job.JobSpec; summary.json and progress.json live in launcher.results.
They import the standard library and the engines and runtime packages below them (no third-party
package): the node and the benchmark import these under any Python."""
