"""Built-in similarity measures, one module each (imported by :func:`probekit.similarity.measure.similarity_measure`).

``cka`` (linear / RBF, debiased, minibatch), ``procrustes`` (angular distance), ``cca``
(SVCCA and PWCCA), ``rsa`` (RDM comparison). A module here registers its measure with
:func:`~probekit.similarity.measure.register_similarity_measure` when imported.
"""
