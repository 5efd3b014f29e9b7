"""The ``elmo`` pipeline component (being written)."""


def make_elmo(*args, **kwargs):
    raise NotImplementedError
