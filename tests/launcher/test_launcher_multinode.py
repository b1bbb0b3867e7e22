"""Multi-node servers and the GPU arithmetic: the rendered job for a 2-node GB300
recipe, field by field, and validation of tp x pp x dp against the allocation."""
from __future__ import annotations

import json
import shlex

from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.login.sbatch import render_sbatch, render_standalone, slurm_parameters
from launcher.engines import get_engine
from launcher.contracts.job import JobSpec
from tests.support.login import with_engine

multinode_flags = get_engine("vllm").multinode_flags


def _flag(argv, flag):
    hits = [i for i, a in enumerate(argv) if a == flag]
    assert len(hits) == 1, f"{flag} appears {len(hits)} times in {argv}"
    return argv[hits[0] + 1]


def test_tp_spanning_two_nodes_uses_vllms_nnodes_launch():
    head = multinode_flags(0, 2, "gb-001", 29500, tp=8, pp=1, dp=1, gpus_per_node=4)
    worker = multinode_flags(1, 2, "gb-001", 29500, tp=8, pp=1, dp=1, gpus_per_node=4)
    assert head == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "gb-001", "--master-port", "29500"]
    assert worker == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "gb-001", "--master-port", "29500",
                      "--headless"]


def test_dp_across_nodes_gives_each_node_its_local_replicas():
    w = multinode_flags(1, 2, "h", 7000, tp=4, pp=1, dp=2, gpus_per_node=4)
    assert _flag(w, "--data-parallel-size-local") == "1" and _flag(w, "--data-parallel-start-rank") == "1"
    assert _flag(w, "--data-parallel-address") == "h" and "--headless" in w
    assert "--headless" not in multinode_flags(0, 2, "h", 7000, tp=4, pp=1, dp=2, gpus_per_node=4)
    assert multinode_flags(0, 1, "h", 7000, tp=4, pp=1, dp=1, gpus_per_node=4) == []


def test_two_node_gb300_render_field_by_field(compose, tmp_path):
    cfg = compose("recipe=qwen3_dflash", "cluster=gb300", "cluster.nodes=2", "parallel.tp=8",
                  f"output_dir={tmp_path}")
    assert validate(*with_engine(cfg)) == []
    (job,) = make_plan(*with_engine(cfg)).jobs
    assert job.server_id.endswith(job.server_id.rsplit("-", 1)[1]) and "-tp8-n2-" in job.server_id
    L = job.launch
    assert (L.server, L.nodes, L.gpus_per_node, L.tp, L.pp, L.dp) == ("srun", 2, 4, 8, 1, 1)
    assert JobSpec.from_dict(json.loads(job.to_json())) == job

    # the allocation: 2 nodes x 4 GPUs, one task per node; the job's own srun is one task on the head
    p = slurm_parameters(cfg.cluster, "x")
    assert p["nodes"] == 2 and p["gpus_per_node"] == 4 and p["ntasks_per_node"] == 1
    assert p["srun_args"] == ["--nodes=1", "--ntasks=1"]
    text = render_sbatch(cfg.cluster, [job], tmp_path / "_submitit", "specdec-x", get_engine(job.engine))
    lines = text.splitlines()
    for want in ("#SBATCH --nodes=2", "#SBATCH --gpus-per-node=4", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --partition=batch", "#SBATCH --account=specdec", "#SBATCH --segment=1",
                 "#SBATCH --time=240"):
        assert want in lines, want
    srun = shlex.split(next(ln for ln in lines if ln.startswith("srun ")))
    assert "--nodes=1" in srun and "--ntasks=1" in srun
    assert not any(a.startswith("--container") or a.startswith("--mpi") for a in srun)

    # one server step per node: head (rank 0) serves the API, node 1 is headless
    steps = {}
    for ln in lines:
        if ln.startswith("#   server node "):
            rank, cmd = ln[len("#   server node "):].split(": ", 1)
            steps[int(rank)] = shlex.split(cmd)
    assert sorted(steps) == [0, 1]
    for rank, argv in steps.items():
        i = argv.index("vllm")
        prefix, server = argv[:i], argv[i:]
        assert prefix[:2] == ["srun", "--overlap"]
        assert f"--nodelist=<node{rank}>" in prefix and "--nodes=1" in prefix and "--ntasks=1" in prefix
        assert "--gpus-per-node=4" in prefix
        assert "--container-image=vllm/vllm-openai:v0.32.0" in prefix
        assert "--container-mounts=/lustre:/lustre" in prefix and "--no-container-mount-home" in prefix
        assert server[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
        assert _flag(server, "--tensor-parallel-size") == "8"
        assert _flag(server, "--nnodes") == "2" and _flag(server, "--node-rank") == str(rank)
        assert _flag(server, "--master-addr") == "<node0>"
        assert _flag(server, "--host") == "0.0.0.0"
        assert json.loads(_flag(server, "--speculative-config"))["method"] == "dflash"
        assert ("--headless" in server) == (rank == 1)
    # the standalone script asks for the same allocation and runs the node side on the spec
    sa = render_standalone(cfg.cluster, job, "specdec-x", get_engine(job.engine)).splitlines()
    assert sa[0] == "#!/bin/bash"
    for want in ("#SBATCH --nodes=2", "#SBATCH --gpus-per-node=4", "#SBATCH --segment=1"):
        assert want in sa
    assert sa[-1].startswith("exec ") and sa[-1].endswith(f"-m launcher.node.serve_and_bench --spec {job.job_dir}/job.json")


def test_validation_checks_the_gpu_arithmetic(compose):
    def errs(*o):
        return {e.field: e.problem for e in validate(*with_engine(compose("recipe=qwen3_dflash", "cluster=gb300", *o)))}
    assert "cluster.nodes" in errs("cluster.nodes=2", "parallel.tp=4")  # 4 GPUs on 8: half the nodes idle
    assert "8" in errs("cluster.nodes=2", "parallel.tp=4")["cluster.nodes"]
    assert errs("cluster.nodes=2", "parallel.tp=4", "parallel.pp=2") == {}
    assert errs("cluster.nodes=2", "parallel.tp=4", "parallel.dp=2") == {}
    assert "parallel.tp" in errs("parallel.tp=8")  # one node of 4
    assert "cluster.nodes=2" in validate(*with_engine(compose("recipe=qwen3_dflash", "cluster=gb300", "parallel.tp=8")))[0].line()
    assert "cluster.nodes" in errs("cluster.nodes=0")
    assert "cluster.container_scope" in errs("cluster.container_scope=everywhere")
