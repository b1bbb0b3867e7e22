"""Speedup against a matched baseline (no speculation, same server otherwise).

* ``paired``  per-request ratios paired by question, with their spread (pure);
* ``predict`` the speedup the measured acceptance predicts (pure);
* ``best_k``  the best num_speculative_tokens per load, as a vLLM schedule (pure);
* ``decompose``, ``causes``, ``like_for_like``, ``at_al``: why a speedup is what it is (AL / step
  cost, the causes named from the machine records and the differing settings, the speedup at any
  AL from the forced runs' step costs); ``why`` puts them on each point row;
* ``al_model``, ``request_parts``, ``held_out``: the speedup at any AL from each request's prefill
  and verify steps (from each repeat's figures), and each forced level predicted from its
  configuration's others (pure);
* ``fleet`` (with ``equal_speed``, ``fleet_points``, ``fleet_text``, ``fleet_cli``): each server against
  its baseline at equal per-user speed, in throughput per GPU, joules and dollars per token (docs/fleet.md);
* ``analysis`` matches speculative points with baseline points in a results folder, writes
  ``speedup.json`` beside each point and the recipe-level ``speedup_summary.json``;
  ``console`` prints it; ``cli`` is ``python -m launcher.speedup DIR``.

docs/speedup.md defines every figure.
"""
