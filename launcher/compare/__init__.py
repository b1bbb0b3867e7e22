"""Compare two benchmark runs point by point: ``python -m launcher.compare A B``."""
