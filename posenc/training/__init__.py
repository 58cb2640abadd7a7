"""A run: built once from its config (`run.py`, with what it trains and is evaluated with read
once into `settings.py`), trained and evaluated by the one loop (`train.py`: restore, compile,
train, evaluate, record), through the update step (`update.py`) of a population
(`population.py`, `state.py`), checkpointed (`checkpoint.py`) and logged (`log.py`). What a
kind of evaluation fills in is `protocol.py`; the frozen evaluation sets `frozen.py`; the
measured cost of a run `cost_model.py`. Nothing here looks a kind up: the caller hands the
run its protocol (`posenc.setup`).
"""
