"""The task-hinting study's tasks (Awasthi & Gupta 2023), as on-device samplers.

"Improving Length-Generalization in Transformers via Task Hinting": a main task (sorting or
increment) trained together with an auxiliary "hint" task on one shared backbone. Every
example is one decoder sequence `prompt answer`, with no EOS token (the paper has none: the
evaluator decodes exactly as many tokens as the answer has).

    from tasks import hinting
    task = hinting.TASKS['sorting_hinted']
    width_p, width_a = task.max_prompt(20), task.max_answer(20)            # 21, 20
    batch = task.sample_train(key, 512, 20, width_p, width_a)   # the 80/20 length law
    batch = task.sample(key, 64, n, 101, 100, 'rep3')           # every example of length n
    hinting.decode(task, batch['tokens'][0, :batch['length'][0]])  # e.g. '17 5 92 5 ⊥ 5 5 17 92'

Tasks (n is the input length; ⊥ ends the input):

    family     task            prompt               answer
    sorting    sorting_hinted  σ0 … σn-1 ⊥          the non-decreasing sort of σ (n tokens)
               successor       σ0 … σn-1 ⊥ a        succ(a), 1 token (see `Successor`)
               count           σ0 … σn-1 ⊥          the rarer of σ's two values, 1 token
               fill            v … v (n) ⊥ v … v (j) v … v (n - j)
    increment  increment       x, MSB first, ⊥      x + 1, least-significant digit first
               carry           x, MSB first, ⊥      per digit of x + 1: digit ↑ carry-out

Vocabularies (tasks of one family share theirs, so one backbone can train them together):

    sorting    id 0 PAD, 1..V the values (value v is id v), V + 1 ⊥, V + 2 ⊤ ("no successor");
               vocab_size V + 3 = 103 for the default V = num_values = 100: the paper's q = 103
               (100 values, ⊥, PAD and a token it never names; ours is ⊤).
    increment  ids 0..9 the digits, 10 ⊥, 11 ↑; vocab_size 12. Past `length` the filler 0 is
               padding (it is a digit too: the lengths mask it).

`decode(task, ids)` renders a sequence: values as numbers, separated by spaces, and '⊥',
'⊤', '↑' (PAD as '_'); `encode(task, text)` is its inverse.

Batches. Every batch sampler returns

    tokens        int32 [B, prompt_width + answer_width]  prompt from column 0, the answer
                  right after it (from column prompt_length), zeros after `length`
    prompt_length int32 [B]   the prompt, ⊥ (and successor's query a, fill's prefix) included
    length        int32 [B]   prompt + answer tokens

Widths are static; the input length n of `sample` may be traced (one compiled program serves
every n). `max_prompt(n)` / `max_answer(n)` give widths that hold any example of length n;
a traced n that does not fit the widths is not detected (truncated sequences). Examples are
drawn one at a time (`example`, `example_train`) and vmapped over per-example keys, so a fixed
training set of D examples is just D keys (`sample_train_keys`).

Training length law (options `min_length`, `short_max`, `short_share`): with probability
short_share (0.8) n is uniform in min_length..short_max, else uniform in
short_max + 1..max_length, max_length being the trainer's (20 in the paper's sorting, 10 in
its increment). When max_length <= short_max every n is uniform in min_length..max_length.
Defaults: sorting family 2..5 ("80% of examples have n in {2..5}"), count 3..5 (it needs
n >= 3), increment family 1..4 ("80% have length <= 4").

Our choices where the paper is silent (digest: ../shared/papers/awasthi2023_task_hinting.md):
  * rep(i, r) is shuffled uniformly after it is built; sorting's training set mixes it in
    with probability `repeat_share` (the paper's "modified" set: 0.1), r uniform in
    2..min(5, i) (r = 2 when i = 1, which makes rep(1, 2) a single uniform value).
  * successor's layout `σ ⊥ a -> succ(a)` is a sorting prefix with one output token; a
    duplicated a is its own successor; a unique maximum is never asked ('exclude') or
    answered ⊤ ('token').
  * count's rarer value occurs c times, c uniform in 1..n-1 without n/2; fill's prefix j is
    uniform in 0..n-1.
  * increment's numbers have no leading zero (1..9 for n = 1); a run of trailing 9s leaves
    the digit above it uniform (so it may be 9 and the run longer than drawn).

Randomness: values and digits are exact uniform draws (`base.uniform_digits`); draws with a
per-example range (a length, a count, a position) use 64 random bits reduced mod k
(`base.uniform_below`), biased by less than k / 2**64; shuffles and draws without
replacement sort by 64 random bits per position (`random_order`); Bernoulli choices compare
a float32 uniform with the share.

The base class, the vocabulary text and the random helpers are in `hint_core.py`; the
sorting family in `hint_sorting.py`, the increment family in `hint_increment.py`.
"""

from __future__ import annotations

# pylint: disable=unused-import,g-importing-member
from tasks.hint_core import (
  HintingTask,
  _sample_jit,
  decode,
  encode,
  random_order,
  repeated_values,
  uniform_values,
)
from tasks.hint_increment import Carry, Increment
from tasks.hint_sorting import Count, Fill, SortingHinted, Successor
# pylint: enable=unused-import,g-importing-member

TASKS: dict[str, HintingTask] = {
  'sorting_hinted': SortingHinted(),
  'successor': Successor(),
  'count': Count(),
  'fill': Fill(),
  'increment': Increment(),
  'carry': Carry(),
}
