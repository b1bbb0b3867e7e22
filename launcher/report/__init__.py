"""HTML report of benchmark results: ``python -m launcher.report RESULTS_DIR``."""
