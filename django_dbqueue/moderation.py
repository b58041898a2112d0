"""Claim-for-review on any model, at its documented path; the mixin lives in transitions/review.py."""

from .transitions.review import DEFAULT_REVIEW_LEASE, ClaimQuerySetMixin

__all__ = ["DEFAULT_REVIEW_LEASE", "ClaimQuerySetMixin"]
