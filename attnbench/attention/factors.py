"""The factor string ``E1E2E3E4`` of generalized attention, parsed in one place.

Zhu et al., "An Empirical Study of Spatial Attention Mechanisms in Deep Networks", ICCV 2019
(https://arxiv.org/abs/1904.05873), Eq. 2: the attention logit between query ``q`` and key ``k``
is the sum of up to four terms,

    E1  query content  . key content          (z_q^T U_m^T V_m^C x_k)
    E2  query content  . relative position    (z_q^T U_m^T V_m^R R_{k-q})
    E3  learned vector . key content          (u_m^T V_m^C x_k)
    E4  learned vector . relative position    (v_m^T V_m^R R_{k-q})

written as four characters, e.g. ``'0110'`` = E2 + E3.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionFactors:
    """Which of the four terms E1..E4 are enabled."""

    query_key: bool       # E1
    query_position: bool  # E2
    key: bool             # E3
    position: bool        # E4

    @classmethod
    def parse(cls, spec: "str | AttentionFactors") -> "AttentionFactors":
        """Parse ``'0110'`` (or pass an ``AttentionFactors`` through)."""
        if isinstance(spec, AttentionFactors):
            return spec
        if not isinstance(spec, str) or len(spec) != 4 or set(spec) - {"0", "1"}:
            raise ValueError(
                f"attention_type must be four characters of 0/1 (E1E2E3E4), e.g. '0110'; got {spec!r}")
        if spec == "0000":
            raise ValueError("attention_type '0000' enables no term; enable at least one of E1..E4")
        return cls(*(c == "1" for c in spec))

    def __str__(self) -> str:
        return "".join("1" if bit else "0" for bit in self.bits)

    @property
    def bits(self) -> tuple[bool, bool, bool, bool]:
        return (self.query_key, self.query_position, self.key, self.position)

    @property
    def needs_query(self) -> bool:
        """A query projection is used by E1 or E2."""
        return self.query_key or self.query_position

    @property
    def needs_key(self) -> bool:
        """A key projection is used by E1 or E3."""
        return self.query_key or self.key

    @property
    def needs_position(self) -> bool:
        """Relative-position embeddings are used by E2 or E4."""
        return self.query_position or self.position


#: All 15 non-empty factor strings, from '0001' to '1111'.
ALL_FACTORS: tuple[str, ...] = tuple(
    s for s in ("".join(b) for b in itertools.product("01", repeat=4)) if s != "0000")

#: Score functions of the E1 term (query content x key content): attnbench.attention.scores implements them.
SCORES: tuple[str, ...] = ("scaled_dot", "dot", "bilinear", "additive")
