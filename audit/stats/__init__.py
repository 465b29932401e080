"""Statistics: ε lower bounds and their intervals from scores (estimators), the privacy loss and pair ε
of a claimed mechanism, and the shape, sequential and family checks built on them."""
