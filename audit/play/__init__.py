"""Running one game: the spec, the shared setup, the trials (batched, sequential, one-run, on a cluster),
the pair's witness and relation, and the run's outcome."""
