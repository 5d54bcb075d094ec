"""The statistics of a diagnosis: functions of a marker table, apart from the population pipeline.

Everything here takes a table (one row per model: outcome, covariates, seed groups, markers) or
arrays and returns a result with its report blocks: the marker analysis and its verdicts
(:mod:`.analysis`, :mod:`.verdicts`), the inference it rests on (:mod:`.inference`,
:mod:`.association`), calibration and power (:mod:`.calibration`, :mod:`.power`,
:mod:`.simulate`), granulated Kendall tau and CMI (:mod:`.granulated`), level-mean R^2
(:mod:`.levels`), early warning (:mod:`.early`), the censored crossing step (:mod:`.survival`),
two populations compared (:mod:`.compare`) and the causal estimators (:mod:`.causal`).

It imports only :mod:`probekit.errors`, :mod:`probekit.report` (blocks and notebook display)
and :mod:`probekit.stats`, never the pipeline above it (diagnosis files, populations, models,
the runner, table files): the import-linter contract ``diagnosis-statistics`` in
``pyproject.toml`` checks it, annotation-only imports included. The public names are exported
by :mod:`probekit.diagnosis`.
"""
