"""The study's kind of evaluation (Ruoss et al. 2023): accuracy (and exact match) per input
length, trained on a curriculum of lengths 1..N and scored by the mean over the lengths past
N.

  record.py    RangeMember, RangeResults: per member, its metrics at every evaluated length
  protocol.py  the curriculum (one program per length bucket) and the evaluation per length
  section.py   Figure 4 and the per-length tables of a report
  tables.py    Tables 1 and 4, from the runs grouped into cells (`collect_cells`)
  cost.py      the training and evaluation FLOPs of a cell, its measured programs
"""
