"""Statistics of measured figures: the one home of every interval and noise rule. Pure,
standard library only; the ground floor every other part may build on (docs/architecture.md).

* ``repeats``           a few repeats of one figure: mean, sd, Student-t 95 % interval, relative
  MAD and the noisy rule; the interval of a difference between two runs (docs/repeats.md);
* ``paired``            the paired mean difference of two samples (compare's per-repeat pairs);
* ``acceptance_noise``  the sampling noise of acceptance figures counted over verify steps: the
  tolerance of every check of a measured AL against an expected one (docs/golden.md).
"""
