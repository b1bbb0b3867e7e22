"""The node job's entry point under its old name. It moved to launcher.node.job_entry; a Slurm
job queued by an earlier checkout holds a pickled reference to ``launcher.login.node_job.run_job``
(submitit's submission file) and starts through this name, so it still runs."""
from launcher.node.job_entry import node_command, run_job  # noqa: F401 (the names a queued job holds)
