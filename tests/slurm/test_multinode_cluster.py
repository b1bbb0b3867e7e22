"""The multi-node test cluster (SPECDEC_SLURM_NODES=2 common/setup/slurm_up.sh): an
allocation of two nodes runs its tasks on two hostnames, each in its own network
namespace with its own bridge address, and a job on one node reaches the other by name."""
from __future__ import annotations

import random
import subprocess

REPORT = ('echo "$(hostname) $SLURMD_NODENAME $(readlink /proc/self/ns/net) '
          '$(ip -4 -o addr show dev eth0 | awk \'{print $4}\')"')


def test_srun_two_nodes_answers_from_two_hostnames_with_their_own_addresses(slurm_multinode):
    p = subprocess.run(["srun", "-N2", "--ntasks-per-node=1", "sh", "-c", REPORT], capture_output=True, text=True,
                       timeout=60, env=slurm_multinode.env())
    assert p.returncode == 0, p.stderr
    rows = sorted(line.split() for line in p.stdout.splitlines() if line.strip())
    assert [r[0] for r in rows] == ["specdec-n1", "specdec-n2"], p.stdout  # hostnames (UTS namespaces)
    assert all(r[0] == r[1] for r in rows), p.stdout  # Slurm's node name is the hostname
    assert rows[0][2] != rows[1][2], p.stdout  # two network namespaces
    assert [r[3] for r in rows] == [slurm_multinode.nodes["specdec-n1"] + "/24",
                                    slurm_multinode.nodes["specdec-n2"] + "/24"], p.stdout
    # the single-node cluster's config is not the one in use
    assert slurm_multinode.slurm_conf.endswith("slurm-multi/slurm.conf")


def test_a_step_on_one_node_reaches_the_other_by_name(slurm_multinode, tmp_path):
    """Inside a 2-node job, a step on specdec-n2 resolves specdec-n1 to n1's bridge address
    (the head's address as the other ranks get it) and connects to a listener there."""
    port = random.randint(20000, 30000)
    script = ("srun --overlap -N1 -n1 -w specdec-n1 python3 -c \"import socket; s=socket.socket(); "
              f"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', {port})); s.listen(); "
              "c,_=s.accept(); c.sendall(socket.gethostname().encode())\" & "
              "sleep 1; srun --overlap -N1 -n1 -w specdec-n2 python3 -c \"import socket; "
              f"a=socket.gethostbyname('specdec-n1'); c=socket.create_connection((a, {port}), timeout=10); "
              "print(socket.gethostname(), a, c.recv(64).decode())\"; wait")
    out = tmp_path / "job.out"  # the shared filesystem: the job writes it on specdec-n1
    p = subprocess.run(["sbatch", "--wait", "-N2", "-o", str(out), "--wrap", script], capture_output=True,
                       text=True, timeout=120, env=slurm_multinode.env())
    assert p.returncode == 0, p.stdout + p.stderr + out.read_text()
    assert f"specdec-n2 {slurm_multinode.nodes['specdec-n1']} specdec-n1" in out.read_text(), out.read_text()
