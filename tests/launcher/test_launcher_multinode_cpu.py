"""Multi-node on a CPU cluster (gpus_per_node 0, e.g. the multi-node test cluster): each
node runs one rank, so tp x pp x dp must equal cluster.nodes; dp across nodes gives each
node one local replica."""
from __future__ import annotations

from launcher.engines import get_engine
import pytest
from tests.support.login import with_engine


@pytest.mark.parametrize("over, field", [
    (["cluster.nodes=2", "parallel.tp=2"], None),
    (["cluster.nodes=2", "parallel=tp1", "parallel.dp=2"], None),
    (["cluster.nodes=2", "parallel.tp=4"], "cluster.nodes"),
    (["parallel.tp=2"], "parallel.tp"),
])
def test_a_cpu_cluster_runs_one_rank_per_node(compose, tmp_path, over, field):
    from launcher.login.config.validate import validate

    errs = validate(*with_engine(compose("cluster=slurm", f"output_dir={tmp_path}", *over)))
    if field is None:
        assert errs == [], errs
    else:
        assert field in {e.field for e in errs}, errs


def test_dp_across_cpu_nodes_gives_each_node_one_replica(compose, tmp_path):
    from launcher.login.plan import make_plan

    (job,) = make_plan(*with_engine(compose("cluster=slurm", "cluster.nodes=2", "parallel=tp1", "parallel.dp=2",
                               f"output_dir={tmp_path}"))).jobs
    w = job.server_argv("0.0.0.0", 8000, 1, "10.231.77.11", 7000, engine=get_engine(job.engine))
    assert w[w.index("--data-parallel-size-local") + 1] == "1" and w[w.index("--data-parallel-start-rank") + 1] == "1"
    assert w[w.index("--data-parallel-address") + 1] == "10.231.77.11" and "--headless" in w


def test_a_multi_node_job_is_done_when_its_head_task_wrote_its_result(tmp_path):
    """submitit sees nodes x 1 tasks, but only the head's task runs (srun --nodes=1 --ntasks=1):
    the launcher follows that task, or a wait without accounting never ends."""
    import pickle

    import submitit

    from launcher.login.submit import head_task

    job = submitit.SlurmJob(folder=tmp_path, job_id="14", tasks=(0, 1))
    head = head_task(job)
    assert head is not job and str(head.paths.result_pickle).endswith("14_0_result.pkl")
    assert not head.paths.result_pickle.exists()
    with open(head.paths.result_pickle, "wb") as f:
        pickle.dump(("success", {"exit_code": 0, "message": "done"}), f)
    assert head.done() and head.result() == {"exit_code": 0, "message": "done"}
    single = submitit.SlurmJob(folder=tmp_path, job_id="15", tasks=(0,))
    assert head_task(single) is single
