import sys

from launcher.compare.cli import main

sys.exit(main())
