"""Validate benchmark result directories and push them to S3.

The package backs the ``upload_to_s3`` console script (``upload.cli:main``);
``python -m upload`` runs the same command.  See ``upload/README.md``.
"""

__version__ = "0.1.0"
