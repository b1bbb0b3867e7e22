import sys

from launcher.report.cli import main

sys.exit(main())
