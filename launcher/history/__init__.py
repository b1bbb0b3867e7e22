"""History of uploaded runs: ``python -m launcher.history s3://BUCKET/PREFIX`` (docs/history.md)."""
