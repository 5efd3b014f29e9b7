"""Thinc layers: the biLM wrapper, the weighting schemes and the listener."""
