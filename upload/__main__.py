"""``python -m upload`` runs the ``upload_to_s3`` command."""

import sys

from upload.cli import main

sys.exit(main())
