"""Where runs live: a local path or an object store URL (gs://, s3://), behind one set of
functions (`io.py`: atomic writes, JSON lines; `store.py`: the stores), and the one writer of
a work directory (`lease.py`, with `processes.py` naming who holds it).
"""
