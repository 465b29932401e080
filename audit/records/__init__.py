"""Records: the trial store, the result format and its provenance, the log, and the reports read from results."""
