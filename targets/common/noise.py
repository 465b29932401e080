"""The noise laws a claim can declare for its released steps (``Claim.step.law``, a trace's
``noise``), by the names results and flags use."""
from __future__ import annotations

from targets.common.value_enum import ValueEnum


class NoiseLaw(ValueEnum):
    """A declared noise law; compares equal to its name (``NoiseLaw.GAUSSIAN == "gaussian"``)."""

    GAUSSIAN = "gaussian"
    SML = "sml"  # the HeterPoisson paper's √W·s·N(0, I) with one W ~ Exp(1) per step
    LAPLACE = "laplace"
