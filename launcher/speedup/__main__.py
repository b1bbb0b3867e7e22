import sys

from launcher.speedup.cli import main

sys.exit(main())
