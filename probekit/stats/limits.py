"""Upper bounds on resampling sizes, one constant each (no imports: spec files read them cheaply).

``MAX_PERMUTATIONS``: the smallest attainable permutation p is ``1 / (1 + n)`` (Phipson & Smyth
2010), so 100 000 resolves p down to 1e-5 (Holm over 2 000 tests at alpha = 0.05 needs 39 999),
with a Monte-Carlo error at p = 0.05 of ``sqrt(0.05 * 0.95 / 1e5) = 0.0007``. Each permutation
refits a probe or recomputes a statistic, so 1e9 would run for days: larger requests are refused.

``MAX_RESAMPLES``: bootstrap resamples of one percentile interval; 1000-2000 suffice for a 95%
interval (Efron & Tibshirani 1993, ch. 19), 100 000 makes the endpoints' Monte-Carlo error
negligible; more only costs time and memory.

``MAX_SIMULATIONS``: simulated populations per effect of a power / false-positive calibration
(:func:`probekit.diagnosis.calibrate`); a rate near 5% from 10 000 simulations has a Monte-Carlo
error of ``sqrt(0.05 * 0.95 / 1e4) = 0.002``, and each simulation runs a whole permutation
analysis.

Draws of other null distributions (random control substrates ``n_random``, label shuffles
``n_shuffles``) and the permutations of every API are bounded by ``MAX_PERMUTATIONS``; every
bootstrap (``n_bootstrap``, ``n_resamples``, wild cluster draws) by ``MAX_RESAMPLES``.

Used by :mod:`probekit.stats.permutation`, :mod:`probekit.stats.bootstrap`, the suites'
``[stats]`` (also the ``[stats]`` of hypothesis files) and the diagnosis files' ``[diagnosis]``.

``MIN_RESAMPLES``: the fewest bootstrap resamples of a percentile interval probekit reports
(1000 for a 95% interval, Efron & Tibshirani 1993, ch. 19): the suites' ``[stats]`` and the
diagnosis' ``[diagnosis] n_bootstrap`` (the marker analysis' wild cluster bootstrap and the
mediation's intervals) refuse fewer when the file loads.
"""

MIN_RESAMPLES = 1000
MAX_PERMUTATIONS = 100_000
MAX_RESAMPLES = 100_000
MAX_SIMULATIONS = 10_000
