"""The pace of the model providers, shared by every session of an experiment (issue 27)."""
