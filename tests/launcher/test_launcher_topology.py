"""topology=disagg, pure: the prefill/decode server argv and environment from the engine
seam, the router's argv, the plan's topology section and job folder, validation's one-line
errors, and the rendered commands. No process is started."""
from __future__ import annotations

import json

import pytest

from launcher.login.config.validate import validate
from launcher.engines import EngineError, get_engine
from launcher.login.plan import make_plan
from launcher.login.sbatch import describe_commands
from launcher.contracts.job import JobSpec
from tests.support.login import with_engine


def _flag(argv, flag):
    hits = [i for i, a in enumerate(argv) if a == flag]
    assert len(hits) == 1, f"{flag} appears {len(hits)} times in {argv}"
    return argv[hits[0] + 1]


def test_engine_builds_each_sides_kv_transfer_flags():
    eng = get_engine("vllm")
    p = eng.disagg_flags("prefill", "NixlConnector", "cpu", 600)
    d = eng.disagg_flags("decode", "NixlConnector", "cpu", 600, prefix_caching=False)
    assert json.loads(_flag(p, "--kv-transfer-config")) == {
        "kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_buffer_device": "cpu",
        "kv_connector_extra_config": {"kv_lease_duration": 600}}
    assert json.loads(_flag(d, "--kv-transfer-config"))["kv_role"] == "kv_consumer"
    assert "--no-enable-prefix-caching" in d and "--no-enable-prefix-caching" not in p
    assert eng.disagg_env(5601) == {"VLLM_NIXL_SIDE_CHANNEL_PORT": "5601"}
    with pytest.raises(EngineError, match="unknown disaggregated role"):
        eng.disagg_flags("both", "NixlConnector", "cpu", 600)


def test_router_argv_is_vllm_routers_pd_mode():
    argv = get_engine("vllm").router_argv("/v/bin/vllm-router", "127.0.0.1", 9000, ["http://h:1", "http://h:2"],
                                          ["http://h:3"], "round_robin", ("--log-level", "warning"))
    assert argv[:4] == ["/v/bin/vllm-router", "--vllm-pd-disaggregation", "--kv-connector", "nixl"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--prefill"] == ["http://h:1", "http://h:2"]
    assert _flag(argv, "--decode") == "http://h:3" and _flag(argv, "--port") == "9000"
    assert argv[-2:] == ["--log-level", "warning"]
    m = get_engine("vllm").router_argv("vllm-router", "127.0.0.1", 9000, ["http://p"], ["http://d"], metrics_port=9001)
    assert _flag(m, "--prometheus-host") == "127.0.0.1" and _flag(m, "--prometheus-port") == "9001"


def test_plan_puts_the_topology_in_the_job_spec_and_its_own_folder(compose, tmp_path):
    agg = compose(f"output_dir={tmp_path}")
    dis = compose("topology=disagg", "bench.disagg_parity=true", "topology.decode=2", f"output_dir={tmp_path}")
    assert validate(*with_engine(dis)) == []
    (a,), (d,) = make_plan(*with_engine(agg)).jobs, make_plan(*with_engine(dis)).jobs
    assert a.topology is None and d.topology is not None
    t = d.topology
    assert (t.prefill, t.decode, t.kv_buffer_device, t.kv_lease_duration_s, t.decode_prefix_caching) == \
        (1, 2, "cpu", 600, False)
    assert "-pd1x2-" in d.server_id and d.job_dir != a.job_dir
    assert t.parity.job_dir == a.job_dir  # the aggregated side is the aggregated run's own folder
    assert t.parity.bench.save_dir == a.job_dir and t.parity.al_tolerance == 0.05
    assert JobSpec.from_dict(json.loads(d.to_json())) == d  # round trip through job.json
    decode = d.server_argv("127.0.0.1", 8001, disagg_role="decode", engine=get_engine(d.engine))
    prefill = d.server_argv("127.0.0.1", 8000, disagg_role="prefill", engine=get_engine(d.engine))
    for argv in (decode, prefill):  # the draft on both sides: its layers are transferred too
        assert json.loads(_flag(argv, "--speculative-config"))["method"] == "draft_model"
    assert json.loads(_flag(prefill, "--kv-transfer-config"))["kv_role"] == "kv_producer"
    assert "--no-enable-prefix-caching" in decode and "--kv-transfer-config" not in d.server_argv("h", 1, engine=get_engine(d.engine))


def test_gpu_cluster_puts_the_kv_buffer_on_the_gpu(compose, tmp_path):
    cfg = compose("recipe=qwen3_eagle3", "cluster=h100", "topology=disagg", f"output_dir={tmp_path}",
                  "cluster.container_scope=job")
    (job,) = make_plan(*with_engine(cfg)).jobs
    assert job.topology.kv_buffer_device == "cuda"
    assert job.topology.kv_progress_poll_us == 0  # NIXL as shipped where the servers have cores to spare


def test_nixls_progress_thread_gets_a_poll_timeout_on_the_cpu_build(compose, tmp_path):
    (job,) = make_plan(*with_engine(compose("topology=disagg", f"output_dir={tmp_path}"))).jobs
    assert job.topology.kv_progress_poll_us == 1000
    (asked,) = make_plan(*with_engine(compose("topology=disagg", "topology.kv_progress_poll_us=0", f"output_dir={tmp_path}"))).jobs
    assert asked.topology.kv_progress_poll_us == 0
    eng = get_engine("vllm")
    assert eng.disagg_env(5601, progress_poll_us=1000)["SPECDEC_NIXL_PROGRESS_DELAY_US"] == "1000"
    assert "SPECDEC_NIXL_PROGRESS_DELAY_US" not in eng.disagg_env(5601, progress_poll_us=0)
    # the dry run shows it on every server's line
    servers = [ln for ln in describe_commands(job, get_engine(job.engine)) if ln.startswith(("#   prefill", "#   decode"))]
    assert len(servers) == 2 and all("SPECDEC_NIXL_PROGRESS_DELAY_US=1000 " in ln for ln in servers), servers
    assert all("VLLM_NIXL_SIDE_CHANNEL_PORT='<free port" in ln for ln in servers), servers


@pytest.mark.parametrize("overrides, line", [
    (("topology=disagg", "topology.prefill=0"), "topology.prefill: is 0 (fix: use at least 1 server)"),
    (("bench.disagg_parity=true",), "bench.disagg_parity: is set without a disaggregated topology"),
    (("topology=disagg", "topology.kv_lease_duration_s=30"), "topology.kv_lease_duration_s: is 30"),
    (("topology=disagg", "topology.kv_buffer_device=cuda"), "topology.kv_buffer_device: is cuda on a cluster"),
    (("topology=disagg", "topology.router_policy=kv_aware"),
     "topology.router_policy: is 'kv_aware' (needs the prefill servers' KV events"),
    (("topology=disagg", "topology.router_policy=nearest"),
     "topology.router_policy: is 'nearest' (fix: use one of round_robin, power_of_two, cache_aware"),
    (("topology=disagg", "parallel.dp=2"), "parallel.dp: is 2: a disaggregated server is one replica"),
    # the router checks no client key: it listens beside the benchmark only (docs/disagg.md "Who can reach what")
    (("topology=disagg", "cluster=slurm", "topology.router_host=0.0.0.0"),
     "topology.router_host: is '0.0.0.0', where other hosts reach the router, and vllm-router 0.1.17 checks no client key"),
    (("topology=disagg", "topology.router_extra_args=[--host,0.0.0.0]"), "topology.router_extra_args: sets --host:"),
    (("topology=disagg", "topology.router_extra_args=['--prometheus-host=0.0.0.0',--api-key,k]"),
     "topology.router_extra_args: sets --prometheus-host, --api-key:"),
    (("topology=disagg", "topology.kv_progress_poll_us=-1"), "topology.kv_progress_poll_us: is -1 (fix: use 0"),
    (("recipe=qwen3_eagle3", "cluster=h100", "cluster.container_scope=job", "topology=disagg",
      "topology.kv_progress_poll_us=1000"), "topology.kv_progress_poll_us: is 1000 on GPUs (fix: use null or 0"),
])
def test_validation_names_the_field_and_the_fix(compose, tmp_path, overrides, line):
    errs = [e.line() for e in validate(*with_engine(compose(*overrides, f"output_dir={tmp_path}")))]
    assert any(e.startswith(line) for e in errs), errs
    assert all("\n" not in e for e in errs)


def test_dry_run_shows_each_server_and_the_router(compose, tmp_path):
    (job,) = make_plan(*with_engine(compose("topology=disagg", f"output_dir={tmp_path}"))).jobs
    lines = describe_commands(job, get_engine(job.engine))
    text = "\n".join(lines)
    assert "#   prefill 0: VLLM_NIXL_SIDE_CHANNEL_PORT=" in text and "#   decode 0: " in text
    router = next(ln for ln in lines if ln.startswith("#   router: "))
    assert "--vllm-pd-disaggregation" in router and "venvs/router/bin/vllm-router" in router


def test_the_router_and_its_metrics_port_listen_on_loopback_even_on_a_cluster(compose, tmp_path):
    """The cluster binds the servers off loopback (they check the key); the router checks none,
    so it and its Prometheus port listen beside the benchmark, on the head node's loopback."""
    (job,) = make_plan(*with_engine(compose("topology=disagg", "cluster=slurm", f"output_dir={tmp_path}"))).jobs
    assert job.bind_host == "0.0.0.0" and job.topology.router_host == "127.0.0.1"
    router = next(ln for ln in describe_commands(job, get_engine(job.engine)) if ln.startswith("#   router: ")).split()
    assert router[router.index("--host") + 1] == "127.0.0.1"
    assert router[router.index("--prometheus-host") + 1] == "127.0.0.1"
    assert "0.0.0.0" not in router


def test_each_cpu_server_gets_its_own_cores():
    from launcher.contracts.cpu_cores import cpu_core_sets

    assert cpu_core_sets([0, 1], 2) == [[[0]], [[1]]]
    assert cpu_core_sets([0, 1, 2, 3, 4], 2) == [[[0, 1]], [[2, 3]]]
    assert cpu_core_sets(list(range(8)), 2, tp=2) == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert cpu_core_sets([0, 1], 3) is None  # fewer cores than servers: shared
    env = get_engine("vllm").disagg_env(5600, [[0, 1], [2, 3]])
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0,1|2,3"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in get_engine("vllm").disagg_env(5600)


def test_router_policies_stay_available(compose, tmp_path):
    for policy in ("round_robin", "power_of_two", "cache_aware"):
        cfg = compose("topology=disagg", "topology.prefill=2", f"topology.router_policy={policy}",
                      f"output_dir={tmp_path}")
        assert validate(*with_engine(cfg)) == []
        (job,) = make_plan(*with_engine(cfg)).jobs
        router = next(ln for ln in describe_commands(job, get_engine(job.engine)) if ln.startswith("#   router: "))
        assert f"--policy {policy}" in router and router.count("--prefill ") == 2


def test_baseline_with_disagg_is_the_same_topology_without_speculation(compose, tmp_path):
    cfg = compose("topology=disagg", "sweep.baseline=true", f"output_dir={tmp_path}")
    assert validate(*with_engine(cfg)) == []
    plan = make_plan(*with_engine(cfg))
    (job,) = plan.jobs
    assert "-pd1x1-" in plan.baseline.server_id and plan.baseline.server_id.startswith("tiny-none-tp1-pd1x1-")
    assert plan.baseline.speculative_config is None and job.baseline.run_here
    # the aggregated baseline keeps its own folder
    agg = make_plan(*with_engine(compose("sweep.baseline=true", f"output_dir={tmp_path}"))).baseline
    assert agg.server_id != plan.baseline.server_id and "-pd" not in agg.server_id
    # the disaggregated servers' argv without the speculative flags, the KV-transfer flags kept
    argv = job.server_argv("127.0.0.1", 1, disagg_role="decode", speculative_config=None, engine=get_engine(job.engine))
    assert "--speculative-config" not in argv and "--kv-transfer-config" in argv


def test_three_cpu_servers_on_two_cores_decode_keeps_its_own():
    from launcher.contracts.cpu_cores import disagg_core_sets

    assert disagg_core_sets([0, 1], ["prefill", "decode"]) == [[[0]], [[1]]]  # enough cores: disjoint
    assert disagg_core_sets([0, 1], ["prefill", "prefill", "decode"]) == [[[0]], [[0]], [[1]]]
    assert disagg_core_sets([0, 1, 2], ["prefill", "prefill", "decode", "decode"]) == [[[0]], [[0]], [[1]], [[2]]]
    assert disagg_core_sets([0], ["prefill", "decode"]) is None  # no core left for prefill: vLLM's own
    assert disagg_core_sets([0, 1], ["prefill", "decode"], tp=2) is None


def test_router_gets_the_servers_key_from_its_environment_never_its_command_line():
    eng = get_engine("vllm")
    argv = eng.router_argv("vllm-router", "127.0.0.1", 9000, ["http://p0"], ["http://d0"], "cache_aware")
    keyed, env = eng.router_with_key(argv, "s3cret")
    assert keyed == argv and not any("s3cret" in a for a in keyed)
    assert env == {"OPENAI_API_KEY": "s3cret"}  # what vllm-router's P/D mode sends the servers


def test_kv_path_warm_up_waits_for_every_server():
    from launcher.node.disagg import unwarmed

    before = {"prefill0": 0.0, "prefill1": 0.0, "decode0": 0.0}
    assert unwarmed(before, {"prefill0": 1.0, "prefill1": 0.0, "decode0": 1.0}) == ["prefill1"]
    assert unwarmed(before, {"prefill0": 1.0, "prefill1": 1.0, "decode0": 2.0}) == []
    # a server whose counter cannot be read is not waited for
    assert unwarmed({"prefill0": None, "decode0": 0.0}, {"prefill0": None, "decode0": None}) == []
