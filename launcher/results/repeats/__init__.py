"""Repeated measurements of a point (``sweep.repeats``) and their noise (docs/repeats.md).

Their statistics are launcher.stats.repeats'.

* ``record``  each repeat's figures from its AIPerf records, and the point's
  ``repeats.json`` (our file; specdec_bench's files hold one repeat).
"""
