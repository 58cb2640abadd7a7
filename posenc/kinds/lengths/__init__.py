"""The task-hinting study's kind of evaluation (Awasthi & Gupta 2023): exact match, edit
distance and token accuracy of the main task's generations per test distribution and length,
for a decoder trained on the main task and its hints (one head each).

  record.py    LengthsMember, LengthsResults: per member, its metrics per distribution and
               length
  protocol.py  the main task and its hints in every batch, the evaluation per length
  section.py   hints.md and a figure per task
  cost.py      the program of test length n measured, every test length's sequences counted
"""
