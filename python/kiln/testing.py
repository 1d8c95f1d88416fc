"""Comparing arrays with kiln's one strict comparator (kiln_compare).

An element passes iff |actual - expected| <= atol + rtol * |expected| with actual finite where
expected is finite; an infinite expected value needs the same infinity; a NaN expected value
passes only with nan_equal=True and a NaN actual value. NaN or Inf in `actual` never passes by
accident, whatever the tolerance. Integers compare in exact integer arithmetic (no rounding,
no overflow).
"""

import numpy as np

from . import _kiln
from ._errors import KilnError


class CompareResult:
    """What kiln_compare found: count, mismatches, nan_mismatches, inf_mismatches,
    max_abs_error, max_rel_error (over finite pairs), first_mismatch (flat index, -1 if none), and
    report (kiln's one-line report)."""

    def __init__(self, figures, report):
        self.__dict__.update(figures)
        self.report = report

    @property
    def passed(self):
        return self.mismatches == 0

    def __repr__(self):
        return f"CompareResult({self.report!r})"


def _as_array(value, like=None):
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    return np.ascontiguousarray(np.asarray(value, dtype=None if like is None else like.dtype))


def compare(actual, expected, atol=1e-5, rtol=1e-5, nan_equal=False):
    """Compares actual with expected; returns a CompareResult (mismatches are no error).

    Raises kiln.KilnError (a ValueError) when the dtypes or shapes differ or a tolerance is
    negative or NaN. A non-array `expected` (a list, a scalar) takes actual's dtype.
    """
    actual = _as_array(actual)
    expected = _as_array(expected, like=actual)
    figures, report = _kiln.compare(actual, expected, float(atol), float(rtol), bool(nan_equal))
    return CompareResult(figures, report)


def assert_allclose(actual, expected, atol=1e-5, rtol=1e-5, nan_equal=False):
    """Asserts that actual matches expected by kiln's strict comparator.

    Raises AssertionError with kiln's one-line report when an element fails, or with kiln's
    message when the dtypes or shapes differ; kiln.KilnError for a bad tolerance. Returns the
    CompareResult when every element passes.
    """
    actual = _as_array(actual)
    expected = _as_array(expected, like=actual)
    try:
        figures, report = _kiln.compare(actual, expected, float(atol), float(rtol),
                                        bool(nan_equal))
    except KilnError as e:
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise AssertionError(str(e)) from None
        raise
    result = CompareResult(figures, report)
    if not result.passed:
        raise AssertionError(report)
    return result
