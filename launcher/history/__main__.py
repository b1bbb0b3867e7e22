"""A static HTML page of every uploaded run over time: ``python -m launcher.history SOURCE``."""
import sys

from launcher.history.cli import main

sys.exit(main())
