"""Helpers shared by the target packages: accounting, the DP-SGD pieces and their trace, the
stacked (batched) models, the registry, and the sensitivity probe's step types."""
