import sys

from launcher.login.cli import main

sys.exit(main())
