"""Exceptions raised by spacy-elmo-mix."""


class ElmoFileError(ValueError):
    """An ELMo options, weights or cache file is missing, unreadable or malformed."""


class ElmoConfigError(ValueError):
    """A component or weighting-scheme setting does not fit the model it is used with."""
