"""The project workflow: data conversion (``convert``, data sets described as data), one training run
(``run``), the grid runner (``grid``), run identities (``identity``: what produced a result, so that
stale results rerun) and the comparison of weighting schemes (``compare``).

Every file the workflow writes goes through :mod:`spacy_elmo_mix.atomic`, so that it is either complete
or absent (a killed run must not leave a truncated ``.spacy`` or ``metrics.json`` that a later resume
would trust).
"""
