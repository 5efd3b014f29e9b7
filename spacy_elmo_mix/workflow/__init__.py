"""The project workflow: data conversion (``convert``), the grid runner (``grid``) and the comparison
of weighting schemes (``compare``).

Every file the workflow writes goes through :mod:`spacy_elmo_mix.atomic`, so that it is either complete
or absent (a killed run must not leave a truncated ``.spacy`` or ``metrics.json`` that a later resume
would trust).
"""
