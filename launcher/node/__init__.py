"""Node-side job code: the server's lifecycle and the serve-then-benchmark driver
that common/specdec_aiperf/run.sh runs (``python -m launcher.node.serve_and_bench``).
Nothing is imported here: the login side imports the node's entry (``job_entry``) alone."""
