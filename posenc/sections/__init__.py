"""What every kind's section of a report is made of, below the kinds (`posenc.kinds`: each
kind's section.py builds on these; `posenc.report` gathers the sections above them):

  core.py    the names of rows and columns, the report's options and metric, a section's
             output (`Section`) and the report's errors
  load.py    finding results.json files, and the column labels of the runs they hold
  tables.py  the table helpers sections share: names in order, percentages, notes
  notes.py   the notes of every table of merged runs
  plots.py   posenc's figure styles, one per encoding in every figure
"""
