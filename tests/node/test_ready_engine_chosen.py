"""server_ready.json's ``engine_chosen`` (issue 53): what the engine said at start it chose for itself
(launcher.engines Readiness.chosen_settings), read from this start's part of the server log: the
log is appended across restarts, so an earlier start's line is not this server's."""
from __future__ import annotations

from launcher.engines import get_engine
from launcher.node.lifecycle import ServerProcess


def test_ready_info_records_what_the_engine_chose_in_this_start(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO [vllm.py:886] Asynchronous scheduling is enabled.\n")
    sp = ServerProcess(["vllm", "serve", "m"], probe_host="127.0.0.1", port=1, served_name="m", log_path=log,
                       engine=get_engine("vllm"))
    assert sp.ready_info("127.0.0.1").engine_chosen == {"async_scheduling": "on"}
    sp._log_offset = log.stat().st_size  # what start() records before a second start appends
    assert sp.ready_info("127.0.0.1").engine_chosen is None
    assert "engine_chosen" not in sp.ready_info("127.0.0.1").to_dict()
    with open(log, "a") as f:
        f.write("INFO [vllm.py:886] Asynchronous scheduling is disabled.\n")
    assert sp.ready_info("127.0.0.1").to_dict()["engine_chosen"] == {"async_scheduling": "off"}
