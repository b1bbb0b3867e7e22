"""A Slurm job queued before the node's entry point moved (launcher.login.node_job ->
launcher.node.job_entry) holds a pickled reference to the old name: it must still start."""
import pickle

from launcher.node import job_entry


def test_a_submission_pickled_under_the_old_name_loads_the_entry_point():
    # What an older checkout's submitit wrote for its function: a global reference, module and name.
    old = b"\x80\x02clauncher.login.node_job\nrun_job\nq\x00."
    assert pickle.loads(old) is job_entry.run_job
