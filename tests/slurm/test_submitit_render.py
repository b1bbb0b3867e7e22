"""How submitit 1.5.x renders the sbatch script (no cluster needed).

Pins the contract the submitter relies on: GPU and account flags as #SBATCH
lines, pyxis flags on the srun line, setup lines before srun, arrays.
"""

from __future__ import annotations

from submitit.slurm.slurm import _make_sbatch_string


def _render(**kw) -> str:
    return _make_sbatch_string(command="python -u -m submitit.core._submit /f", folder="/logs/%j", **kw)


def test_gpus_account_and_additional_parameters():
    s = _render(
        gpus_per_node=4, account="a1", partition="p", time=30,
        additional_parameters={"account": "override", "reservation": "r1", "exclusive": True},
    )
    lines = s.splitlines()
    assert "#SBATCH --gpus-per-node=4" in lines
    assert "#SBATCH --account=override" in lines  # additional_parameters win
    assert "#SBATCH --account=a1" not in lines
    assert "#SBATCH --reservation=r1" in lines
    assert "#SBATCH --exclusive" in lines  # True renders as a bare flag
    assert "#SBATCH --time=30" in lines  # minutes
    assert "#SBATCH --wckey=submitit" in lines  # always, unless wckey=None


def test_srun_args_and_setup():
    s = _render(
        srun_args=["--container-image=nvcr.io#nvidia/vllm:25.01", "--container-mounts=/data:/data,/m:/m:ro"],
        setup=["export HF_HOME=/data/hf"],
    )
    lines = s.splitlines()
    srun = next(ln for ln in lines if ln.startswith("srun "))
    assert srun.startswith("srun --unbuffered --output /logs/%j/%j_%t_log.out --error /logs/%j/%j_%t_log.err ")
    # each arg shlex-quoted ('#' forces quoting), then the python command
    assert "'--container-image=nvcr.io#nvidia/vllm:25.01' --container-mounts=/data:/data,/m:/m:ro python -u" in srun
    assert lines.index("export HF_HOME=/data/hf") < lines.index(srun)  # setup runs on the host, before srun


def test_array_rendering():
    s = _render(map_count=3, array_parallelism=2)
    lines = s.splitlines()
    assert "#SBATCH --array=0-2%2" in lines
    assert "#SBATCH --output=/logs/%A_%a/%A_%a_0_log.out" in lines
