"""The arithmetic study's kind of evaluation (McLeish et al. 2024): exact match of greedy
generations on every cell (a, b) of two operand lengths, per region (in distribution, out of
distribution, beyond), for decoders trained on sequences.

  record.py    GridMember, GridResults: per member, its exact match per cell and region
  protocol.py  the cells, their programs (one per pair of padded widths) and the evaluation
  section.py   the heatmaps of a report
  regions.py   the region table (arithmetic.md), from the runs grouped into entries
  cost.py      the program of the cell (n, n) measured, every cell's sequences counted
"""
