"""Command-line commands; see ``spacy_elmo_mix.__main__``."""
