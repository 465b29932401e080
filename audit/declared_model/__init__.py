"""The declared-model checks: whether a target's releases follow the noise law its claim declares."""
