"""Analyses: `python -m launch.analyze trf|erf [flags]`.

  python -m launch.analyze trf --encodings=type1,type2,alibi,inverse_n,inverse_n_log_n \\
      --out=analysis/trf
  python -m launch.analyze erf --workdir=runs/my_run --length=64 --out=analysis/erf
  python -m launch.analyze attention_maps --workdir=runs/my_run --lengths=40,100
  python -m launch.analyze activation_pca --workdir=runs/my_run --lengths=40,100 --layer=-1
  python -m launch.analyze position_probe --workdir=runs/my_run --length=40 --test_length=60
  python -m launch.analyze prefix_shuffle --workdir=runs/lm_run --length=64
  python -m launch.analyze intervene runs/my_run --intervention=yarn:scale=4

trf: the theoretical receptive field of bias encodings (Qin et al. 2023) at their initial
parameters: per encoding and head, TRF(ε) at each horizon of --horizons (ε in --eps) and
whether it settles as the horizon grows (a convergent bias series, their condition for
extrapolation). Writes DIR/trf.json and DIR/trf.png (TRF/m against ε at horizon m, 50
values of ε from 1 to 0, the paper's plot; widest head) and prints a table.

erf: the empirical receptive field of a trained run (its latest checkpoint, one member):
the smallest number of nearest keys holding 1 - ε of each query's attention, per layer and
head, mean and quantiles over queries of --examples inputs at --length (the weights of the
readable attention definition). Writes DIR/erf.json and DIR/erf.png (ERF / keys attended
against ε per layer, mean over heads and queries) and prints a table.

attention_maps: one example's attention per layer (maximum over heads) at each of
--lengths, e.g. a training length and a longer one (Ruoss et al. Fig. 6): DIR/attention_maps.png.
activation_pca: a 2-D PCA of one layer's activations fitted at the first of --lengths and
applied at the others, tokens coloured by position (Ruoss et al. Fig. 5):
DIR/activation_pca.png and .json (explained variance).
position_probe: per layer, a 2-layer MLP trained on the frozen layer outputs of inputs at
--length to name each token's absolute position (Haviv et al. 2022), tested on new inputs at
--test_length (default: --length); the mean absolute distance per layer against random
guessing, (N² - 1) / (3N), and the error per position: DIR/position_probe.json and .png.
prefix_shuffle: a language model's loss at a token with the tokens before it in their order
and shuffled (Haviv et al. App. B), on held-out text: DIR/prefix_shuffle.json.
intervene RUN --intervention=NAME[:k=v,...]: the run's metric by length (every member,
its own evaluation protocol) before and after a test-time intervention on its saved
weights (posenc/analysis/interventions.py: position_interpolation, ntk, yarn and yarn_paper [scale,
original_length], scalable_softmax [s], ordered_positions, slope_scale [scale]):
DIR/intervene_NAME.json and .md.

Flags are absl's (`--flagfile=FILE` too); each analysis defines its own, listed by
`python -m launch.analyze NAME --help`. Bad input (an unknown analysis or flag, no encoding
or an unknown one, a workdir without a run or a checkpoint, ε outside (0, 1), a horizon < 2
or past receptive.MAX_HORIZON (10^8), an --out that is a file or below one) is one line
`error: ...`, exit status 2, nothing written; each is checked before anything is computed.
A full disk is one line naming the file.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from typing import Any, Callable

from absl import flags

from launch import cli
from launch import common
from launch import full_disk
from posenc import analysis
from posenc.analysis import figures as analysis_plots
from posenc.training import checkpoint
from posenc.analysis import interventions
from posenc.storage import io
from posenc.sections import plots
from posenc.analysis import probe
from posenc.analysis import receptive

# The memory trf's weights may take (the default of --max_memory_gb of the others).
MAX_BYTES = 8 * 2**30


Args = types.SimpleNamespace  # an analysis's flag values by name: args.out, args.workdir, ...


@dataclasses.dataclass(frozen=True)
class Analysis:
  """One subcommand: `python -m launch.analyze NAME [flags]`.

  Attributes:
    help: one line, shown by `NAME --help` above the flags.
    define_flags: defines the subcommand's absl flags (called once it is chosen, so that
      analyses may share a flag name with different defaults).
    main: runs it on the flag values: checks them (one-line errors), computes, writes.
    positional: the name of the one positional argument it takes (its value in `args`;
      '' when absent), or None.

  Example: `python -m launch.analyze trf --horizons=64,512` runs ANALYSES['trf'].main(args)
  with args.horizons == '64,512', args.out == 'analysis/trf', ...
  """

  help: str
  define_flags: Callable[[], None]
  main: Callable[[Args], None]
  positional: str | None = None


def _floats(text: str, flag: str) -> list[float]:
  try:
    values = [float(x) for x in text.split(',') if x]
  except ValueError:
    common.fail(f'{flag}={text} must be comma-separated numbers')
  bad = [v for v in values if not 0 < v < 1]
  if not values or bad:
    common.fail(f'{flag}={text}: every ε must lie in (0, 1)')
  return values


def _write_png(out: str, name: str, fig: Any) -> None:
  io.write_bytes_atomic(os.path.join(out, name), plots.png(fig, dpi=120))


# ---------------------------------------------------------------------------------------
# trf: bias encodings at their initial parameters, no run needed.


def trf_flags() -> None:
  flags.DEFINE_string(
    'encodings',
    'type1,type2,alibi,kerple_log,inverse_n,inverse_n_log_n',
    'Bias encodings, comma-separated.',
  )
  flags.DEFINE_string('eps', '0.1,0.01', 'ε values in (0, 1).')
  flags.DEFINE_string(
    'horizons', ','.join(str(h) for h in receptive.HORIZONS), 'Horizons, at least two, >= 2.'
  )
  flags.DEFINE_integer('num_heads', 8, 'Heads of the bias.')
  flags.DEFINE_integer('head_dim', 64, 'Width of a head.')
  flags.DEFINE_string('out', 'analysis/trf', 'Output directory.')


def trf_main(args: Args) -> None:
  names = [n for n in args.encodings.split(',') if n]
  if not names:
    common.fail(
      f'--encodings={args.encodings!r} names no encoding; give bias encodings, e.g. '
      '--encodings=type1,alibi'
    )
  for name in names:
    try:
      receptive.family_of(name)
    except ValueError as e:
      common.fail(e)
  eps = _floats(args.eps, '--eps')
  horizons = common.positive_ints(args.horizons.split(','), '--horizons')
  if min(horizons) < 2 or len(horizons) < 2:
    common.fail(f'--horizons={args.horizons} needs at least two horizons, each >= 2')
  horizons = sorted(horizons)
  if horizons[-1] > receptive.MAX_HORIZON:
    common.fail(
      f'--horizons={args.horizons}: {horizons[-1]:,} exceeds the limit of '
      f'{receptive.MAX_HORIZON:,} (receptive.MAX_HORIZON)'
    )
  common.check_out_dir(args.out, '--out')
  for flag, value in (('--num_heads', args.num_heads), ('--head_dim', args.head_dim)):
    if value < 1:
      common.fail(f'{flag}={value} must be a positive integer')
  need = 8 * args.num_heads * horizons[-1]  # float64 [heads, horizon]
  if need > MAX_BYTES:
    common.fail(
      f'--num_heads={args.num_heads} at horizon {horizons[-1]:,} needs '
      f'{need / 2**30:.1f} GiB of weights, above {MAX_BYTES / 2**30:g} GiB; lower '
      '--num_heads or --horizons'
    )
  kwargs = {'num_heads': args.num_heads, 'head_dim': args.head_dim}
  results, curves = [], {}
  grid = analysis_plots.EPS_GRID
  for name in names:
    per_eps = {str(e): receptive.convergence(name, e, horizons, **kwargs) for e in eps}
    first = next(iter(per_eps.values()))
    results.append(
      {
        'encoding': name,
        'eps': per_eps,
        'converges': first['converges'],
        'basis': first['basis'],
        'settles': all(r['settles'] for r in per_eps.values()),
      }
    )
    w = receptive.weights(name, horizons[0], **kwargs)
    curves[name] = receptive.trf(w, grid).max(axis=0) / horizons[0]
    print(
      f'{name:22s} '
      + '  '.join(
        f'eps={e}: ' + '/'.join(f'{max(t):,}' for t in r['trf']) for e, r in per_eps.items()
      )
      + _verdict(results[-1])
    )
  shown = '/'.join(f'{h:,}' for h in horizons)
  print(f"(the widest head's TRF at horizons {shown})")
  common.make_dir(args.out, '--out')
  io.write_json_atomic(
    os.path.join(args.out, 'trf.json'),
    {
      'horizons': horizons,
      'num_heads': args.num_heads,
      'head_dim': args.head_dim,
      'encodings': results,
    },
  )
  _write_png(args.out, 'trf.png', analysis_plots.trf_figure(grid, curves, horizons[0]))
  print(f'wrote {args.out}/trf.json and {args.out}/trf.png')


def _verdict(result: dict[str, Any]) -> str:
  """'' for a convergent series whose TRF settles, else a short note for the table."""
  if not result['converges']:
    return '  (diverges)' if result['basis'] == 'closed form' else '  (does not settle)'
  return '' if result['settles'] else '  (converges slowly)'


# ---------------------------------------------------------------------------------------
# The analyses of a trained run.


def _run_flags(name: str) -> None:
  flags.DEFINE_string('workdir', '', 'A trained run directory.')
  flags.DEFINE_integer('member', 0, 'Member (seeds x rates order).')
  flags.DEFINE_integer('seed', 0, 'Seed of the inputs.')
  flags.DEFINE_string('out', f'analysis/{name}', 'Output directory.')
  flags.DEFINE_float(
    'max_memory_gb', 8.0, 'Refuse inputs whose attention weights would need more (GiB).'
  )


def _load(args: Args) -> analysis.Run:
  """The checks every analysis of a trained run shares, then its run (one-line errors)."""
  if not args.workdir:
    common.fail('--workdir is required: a trained run directory')
  common.check_out_dir(args.out, '--out')
  try:
    return analysis.load_run(args.workdir, args.member, progress=print)
  except (analysis.AnalysisError, ValueError) as e:
    common.fail(e)


def _max_bytes(args: Args) -> float:
  if not args.max_memory_gb > 0:
    common.fail(f'--max_memory_gb={args.max_memory_gb} must be a positive number')
  return args.max_memory_gb * 2**30


def erf_flags() -> None:
  flags.DEFINE_integer('length', 64, 'Input length.')
  flags.DEFINE_integer('examples', 8, 'Inputs drawn.')
  flags.DEFINE_string('eps', '0.1,0.01', 'ε values in (0, 1).')
  _run_flags('erf')


def erf_main(args: Args) -> None:
  eps = _floats(args.eps, '--eps')
  if args.length < 1 or args.examples < 1:
    common.fail(f'--length={args.length} and --examples={args.examples} must be positive')
  run = _load(args)
  try:
    rows = analysis.attention_rows(run, args.length, args.examples, args.seed, _max_bytes(args))
  except ValueError as e:
    common.fail(e)
  summary = analysis.erf_summary(rows, eps)
  grid = analysis_plots.EPS_GRID
  curves = analysis.erf_summary(rows, grid)
  for e, result in summary['eps'].items():
    for i, heads in enumerate(result['layers']):
      print(
        f'eps={e} layer {i}: '
        + '  '.join(
          f'h{h}: {hd["mean"]:.1f} ({hd["mean_share"]:.2f})' for h, hd in enumerate(heads)
        )
      )
  print('(mean ERF in keys per head, and as a share of the keys attended)')
  common.make_dir(args.out, '--out')
  io.write_json_atomic(
    os.path.join(args.out, 'erf.json'),
    {
      'workdir': args.workdir,
      'step': run.step,
      'member': run.member,
      'encoding': run.config.encoding,
      'length': args.length,
      'examples': args.examples,
      'causal': rows['causal'],
      **summary,
    },
  )
  _write_png(
    args.out, 'erf.png', analysis_plots.erf_figure(grid, curves, run.config.encoding, args.length)
  )
  print(f'wrote {args.out}/erf.json and {args.out}/erf.png')


def _lengths_flags(name: str, examples: int) -> Callable[[], None]:
  """The flags of attention_maps and activation_pca (`examples`: the default of --examples)."""

  def define_flags() -> None:
    flags.DEFINE_string('lengths', '40,100', 'Input lengths, comma-separated.')
    flags.DEFINE_integer('examples', examples, 'Inputs drawn per length.')
    flags.DEFINE_integer('layer', -1, 'activation_pca: the layer (negative: from the last).')
    _run_flags(name)

  return define_flags


def _rows_at(args: Args) -> tuple[analysis.Run, list[int], list[dict]]:
  """(run, lengths, attention rows per length) for the analyses of a trained run."""
  lengths = common.positive_ints(args.lengths.split(','), '--lengths')
  if args.examples < 1:
    common.fail(f'--examples={args.examples} must be a positive integer')
  run = _load(args)
  try:
    for n in lengths:  # Every length before any is computed.
      analysis.check_inputs(run, n, args.examples, _max_bytes(args))
    rows = [
      analysis.attention_rows(run, n, args.examples, args.seed, _max_bytes(args)) for n in lengths
    ]
  except ValueError as e:
    common.fail(e)
  return run, lengths, rows


def maps_main(args: Args) -> None:
  run, lengths, rows = _rows_at(args)
  layers = len(rows[0]['weights'])
  maps = [[analysis.attention_map(row, layer) for layer in range(layers)] for row in rows]
  fig = analysis_plots.attention_maps_figure(maps, lengths, run.config.encoding)
  common.make_dir(args.out, '--out')
  _write_png(args.out, 'attention_maps.png', fig)
  print(f'wrote {args.out}/attention_maps.png ({len(lengths)} lengths x {layers} layers)')


def pca_main(args: Args) -> None:
  run, lengths, rows = _rows_at(args)
  layers = len(rows[0]['hidden'])
  if not -layers <= args.layer < layers:
    common.fail(
      f'--layer={args.layer} is not a layer of the model (0..{layers - 1}, or '
      'negative from the last)'
    )
  layer = args.layer % layers
  result = analysis.activation_pca(rows[0], rows, layer)
  fig = analysis_plots.activation_pca_figure(result, lengths, run.config.encoding, layer)
  common.make_dir(args.out, '--out')
  _write_png(args.out, 'activation_pca.png', fig)
  io.write_json_atomic(
    os.path.join(args.out, 'activation_pca.json'),
    {
      'workdir': args.workdir,
      'step': run.step,
      'member': run.member,
      'layer': layer,
      'lengths': lengths,
      'explained_variance_ratio': result['explained'],
    },
  )
  print(
    f'layer {layer}: the two components explain {result["explained"][0]:.1%} and '
    f'{result["explained"][1]:.1%} at length {lengths[0]}; wrote {args.out}/activation_pca.png'
  )


def probe_flags() -> None:
  flags.DEFINE_integer('length', 40, 'Input length of the probe.')
  flags.DEFINE_integer('test_length', 0, 'Length of the test inputs (0: --length).')
  flags.DEFINE_integer('examples', 32, 'Inputs per batch.')
  flags.DEFINE_integer('steps', 500, 'Probe training steps.')
  _run_flags('position_probe')


def probe_main(args: Args) -> None:
  test_length = args.test_length or args.length
  for flag, value in (
    ('--length', args.length),
    ('--test_length', test_length),
    ('--examples', args.examples),
    ('--steps', args.steps),
  ):
    if value < 1:
      common.fail(f'{flag}={value} must be a positive integer')
  run = _load(args)
  try:
    train_rows = [
      analysis.attention_rows(run, args.length, args.examples, args.seed + i, _max_bytes(args))
      for i in range(4)
    ]
    test_rows = [
      analysis.attention_rows(run, test_length, args.examples, args.seed + 100, _max_bytes(args))
    ]
  except ValueError as e:
    common.fail(e)
  layers = probe.probe_layers(train_rows, test_rows, steps=args.steps, seed=args.seed)
  for i, r in enumerate(layers):
    print(
      f'layer {i}: mean |predicted - true position| {r["mean_abs_distance"]:.2f} '
      f'(random guessing {r["baseline"]:.2f}; train accuracy {r["train_accuracy"]:.2f})'
    )
  fig = analysis_plots.position_probe_figure(layers, run.config.encoding, args.length)
  common.make_dir(args.out, '--out')
  _write_png(args.out, 'position_probe.png', fig)
  io.write_json_atomic(
    os.path.join(args.out, 'position_probe.json'),
    {
      'workdir': args.workdir,
      'step': run.step,
      'member': run.member,
      'encoding': run.config.encoding,
      'length': args.length,
      'test_length': test_length,
      'layers': layers,
    },
  )
  print(f'wrote {args.out}/position_probe.json and {args.out}/position_probe.png')


def shuffle_flags() -> None:
  flags.DEFINE_integer('length', 64, 'Tokens before the scored one.')
  flags.DEFINE_integer('examples', 256, 'Held-out sequences.')
  _run_flags('prefix_shuffle')


def shuffle_main(args: Args) -> None:
  for flag, value in (('--length', args.length), ('--examples', args.examples)):
    if value < 2:
      common.fail(f'{flag}={value} must be an integer >= 2')
  run = _load(args)
  try:
    result = analysis.prefix_shuffle(run, args.length, args.examples, args.seed)
  except (analysis.AnalysisError, ValueError) as e:
    common.fail(e)
  print(
    f'{run.config.encoding}: loss at position {args.length} {result["loss"]:.4f} as '
    f'written, {result["shuffled_loss"]:.4f} with the prefix shuffled '
    f'(+{result["increase"]:.4f})'
  )
  common.make_dir(args.out, '--out')
  io.write_json_atomic(
    os.path.join(args.out, 'prefix_shuffle.json'),
    {
      'workdir': args.workdir,
      'step': run.step,
      'member': run.member,
      'encoding': run.config.encoding,
      **result,
    },
  )


def intervene_flags() -> None:
  flags.DEFINE_string('workdir', '', 'A trained run directory (or give it as RUN).')
  flags.DEFINE_string(
    'intervention',
    None,
    'Required: NAME[:k=v,...], NAME one of position_interpolation, ntk, yarn, yarn_paper, '
    'scalable_softmax, ordered_positions, slope_scale.',
  )
  flags.DEFINE_string('out', 'analysis/intervene', 'Output directory.')


def intervene_main(args: Args) -> None:
  if not args.intervention:
    cli.fail('--intervention is required, e.g. --intervention=yarn:scale=4')
  workdir = args.run or args.workdir
  if not workdir:
    common.fail('give the run: python -m launch.analyze intervene RUN --intervention=NAME')
  if args.run and args.workdir and args.run != args.workdir:
    common.fail(f'two runs given ({args.run} and --workdir={args.workdir}); give one')
  common.check_out_dir(args.out, '--out')
  if io.isfile(os.path.join(workdir, 'config.json')) and not checkpoint.saved_steps(workdir):
    common.fail(f'{workdir} has no checkpoint (train it first)')  # Before a manager makes one.
  try:
    name, params = interventions.parse(args.intervention)
    result = interventions.intervene(workdir, name, params, progress=print)
  except (interventions.InterventionError, ValueError) as e:
    common.fail(e)
  text = interventions.markdown(result)
  print(text)
  common.make_dir(args.out, '--out')
  io.write_json_atomic(os.path.join(args.out, f'intervene_{name}.json'), result)
  io.write_bytes_atomic(os.path.join(args.out, f'intervene_{name}.md'), text.encode())
  print(f'wrote {args.out}/intervene_{name}.json and .md')


# ---------------------------------------------------------------------------------------
# The registry and the dispatch.


ANALYSES = {
  'trf': Analysis(
    'the theoretical receptive field of bias encodings at their initial '
    'parameters (Qin et al. 2023)',
    trf_flags,
    trf_main,
  ),
  'erf': Analysis(
    "the empirical receptive field of a trained run's attention, per layer and head",
    erf_flags,
    erf_main,
  ),
  'attention_maps': Analysis(
    "one example's attention per layer at each length (max over heads)",
    _lengths_flags('attention_maps', 1),
    maps_main,
  ),
  'activation_pca': Analysis(
    "a 2-D PCA of one layer's activations fitted at the first length, applied at the others",
    _lengths_flags('activation_pca', 8),
    pca_main,
  ),
  'position_probe': Analysis(
    "per layer, an MLP probe of each token's absolute position (Haviv et al. 2022)",
    probe_flags,
    probe_main,
  ),
  'prefix_shuffle': Analysis(
    "a language model's loss with the tokens before it in order and shuffled",
    shuffle_flags,
    shuffle_main,
  ),
  'intervene': Analysis(
    "a run's metric by length before and after a test-time intervention on its saved weights",
    intervene_flags,
    intervene_main,
    positional='run',
  ),
}


def main() -> None:
  """`python -m launch.analyze NAME [RUN] [--flags]`: defines NAME's flags, then runs it."""
  name = cli.subcommand(
    sys.argv,
    list(ANALYSES),
    'analysis',
    __doc__ + '\n`python -m launch.analyze NAME --help` lists the flags of one.',
  )
  chosen = ANALYSES[name]
  before = set(flags.FLAGS)
  chosen.define_flags()
  names = sorted(set(flags.FLAGS) - before)

  def run_analysis(argv: list[str]) -> None:
    args = Args(**{n: flags.FLAGS[n].value for n in names})
    rest = argv[1:]
    if chosen.positional:
      setattr(args, chosen.positional, rest[0] if rest else '')
      rest = rest[1:]
    if rest:
      cli.fail(f'unexpected arguments {rest}; see python -m launch.analyze {name} --help')
    kept = lambda: 'the files written before it are whole (each is written atomically)'
    with full_disk.on_full_disk(kept, 'the --out directory'):
      chosen.main(args)

  usage = f'python -m launch.analyze {name}' + (
    f' [{chosen.positional.upper()}]' if chosen.positional else ''
  )
  common.run(run_analysis, [sys.argv[0], *sys.argv[2:]], doc=f'{usage}: {chosen.help}.')


if __name__ == '__main__':
  main()
