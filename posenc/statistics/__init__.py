"""Intervals and comparisons over seeds, shared by the report and the benchmark: the 95%
intervals of means and success rates (`intervals.py`), permutation tests with Holm and the
detectable difference (`verdicts.py`), and the intervals' coverage measured by simulation
(`coverage.py`). No JAX.
"""
