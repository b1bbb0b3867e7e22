"""Repeated measurements of a point (``sweep.repeats``) and their noise (docs/repeats.md).

* ``stats``   mean, sd, 95% t-interval, relative MAD of a few repeats; the
  interval of a difference between two runs (pure, standard library only);
* ``record``  each repeat's figures from its AIPerf records, and the point's
  ``repeats.json`` (our file; specdec_bench's files hold one repeat).
"""
