"""The language models' kind of evaluation (Qin et al. 2023, Haviv et al. 2022): perplexity
per window length, in non-overlapping and sliding windows (a decoder) or of masked bytes (an
encoder).

  record.py    PerplexityMember, PerplexityResults: per member, its perplexity per mode and
               length
  protocol.py  the windows of the validation text and their scorers
  section.py   perplexity.md
"""
