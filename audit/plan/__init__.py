"""Planning: the default portfolio and its pilots, budgets, the catalogue, campaigns and regressions."""
