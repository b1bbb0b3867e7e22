"""Node-side job code: the server's lifecycle and the serve-then-benchmark driver
that common/specdec_aiperf/run.sh runs (``python -m launcher.node.serve_and_bench``)."""
from launcher.node.lifecycle import (  # noqa: F401
    Interrupted,
    ServerDiedError,
    ServerError,
    ServerProcess,
    ServerStartError,
)
