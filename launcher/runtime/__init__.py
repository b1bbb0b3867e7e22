"""What a job needs on a host, on every side (login, node, benchmark): the one atomic
file writer and the repository root, the API-key rule, process helpers, input checks,
the datasets, the CPU's flags and GPU telemetry. Standard library only (psutil/pynvml
where present); imports only the engines below it."""
