import sys

from launcher.speedup.collect import main

sys.exit(main())
