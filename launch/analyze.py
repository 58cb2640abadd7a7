"""Analyses: `python -m launch.analyze trf|erf [flags]`.

  python -m launch.analyze trf --encodings=type1,type2,alibi,inverse_n,inverse_n_log_n \
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
weights (posenc/interventions.py: position_interpolation, ntk, yarn and yarn_paper [scale,
original_length], scalable_softmax [s], ordered_positions, slope_scale [scale]):
DIR/intervene_NAME.json and .md.

Bad input (an unknown analysis, no encoding or an unknown one, a workdir without a run or a
checkpoint, ε outside (0, 1), a horizon < 2 or past receptive.MAX_HORIZON (10^8), an --out
that is a file or below one) is one line `error: ...`, exit status 2, nothing written; each
is checked before anything is computed. A full disk is one line naming the file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any, Callable, NoReturn, Sequence

from launch import common
from posenc import analysis
from posenc import analysis_plots
from posenc import checkpoint
from posenc import interventions
from posenc import io
from posenc import plots
from posenc import probe
from posenc import receptive

# The memory trf's weights may take (the default of --max_memory_gb of the others).
MAX_BYTES = 8 * 2**30


@dataclasses.dataclass(frozen=True)
class Analysis:
  """One subcommand: `python -m launch.analyze NAME [flags]`.

  Attributes:
    help: one line, shown by `NAME --help` above the flags.
    add_flags: adds the subcommand's flags to its parser.
    main: runs it on the parsed flags: checks them (one-line errors), computes, writes.

  Example: ANALYSES['trf'].add_flags(parser); ANALYSES['trf'].main(parser.parse_args([]))
  writes analysis/trf/trf.json and trf.png.
  """

  help: str
  add_flags: Callable[[argparse.ArgumentParser], None]
  main: Callable[[argparse.Namespace], None]


class _Parser(argparse.ArgumentParser):
  def error(self, message: str) -> NoReturn:
    common.fail(f'{self.prog}: {message} (see {self.prog} --help)')


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


def trf_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    '--encodings',
    default='type1,type2,alibi,kerple_log,inverse_n,inverse_n_log_n',
    help='bias encodings, comma-separated',
  )
  parser.add_argument('--eps', default='0.1,0.01', help='ε values in (0, 1)')
  parser.add_argument('--horizons', default=','.join(str(h) for h in receptive.HORIZONS))
  parser.add_argument('--num_heads', type=int, default=8)
  parser.add_argument('--head_dim', type=int, default=64)
  parser.add_argument('--out', default='analysis/trf')


def trf_main(args: argparse.Namespace) -> None:
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


def _run_flags(parser: argparse.ArgumentParser, name: str) -> None:
  parser.add_argument('--workdir', default='', help='a trained run directory')
  parser.add_argument('--member', type=int, default=0, help='member (seeds x rates order)')
  parser.add_argument('--seed', type=int, default=0, help='seed of the inputs')
  parser.add_argument('--out', default=f'analysis/{name}')
  parser.add_argument(
    '--max_memory_gb',
    type=float,
    default=8.0,
    help='refuse inputs whose attention weights would need more (GiB)',
  )


def _load(args: argparse.Namespace) -> analysis.Run:
  """The checks every analysis of a trained run shares, then its run (one-line errors)."""
  if not args.workdir:
    common.fail('--workdir is required: a trained run directory')
  common.check_out_dir(args.out, '--out')
  try:
    return analysis.load_run(args.workdir, args.member, progress=print)
  except (analysis.AnalysisError, ValueError) as e:
    common.fail(e)


def _max_bytes(args: argparse.Namespace) -> float:
  if not args.max_memory_gb > 0:
    common.fail(f'--max_memory_gb={args.max_memory_gb} must be a positive number')
  return args.max_memory_gb * 2**30


def erf_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--length', type=int, default=64, help='input length')
  parser.add_argument('--examples', type=int, default=8, help='inputs drawn')
  parser.add_argument('--eps', default='0.1,0.01', help='ε values in (0, 1)')
  _run_flags(parser, 'erf')


def erf_main(args: argparse.Namespace) -> None:
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


def _lengths_flags(name: str, examples: int) -> Callable[[argparse.ArgumentParser], None]:
  """The flags of attention_maps and activation_pca (`examples`: the default of --examples)."""

  def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--lengths', default='40,100', help='input lengths')
    parser.add_argument('--examples', type=int, default=examples, help='inputs drawn per length')
    parser.add_argument('--layer', type=int, default=-1, help='activation_pca: the layer')
    _run_flags(parser, name)

  return add_flags


def _rows_at(args: argparse.Namespace) -> tuple[analysis.Run, list[int], list[dict]]:
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


def maps_main(args: argparse.Namespace) -> None:
  run, lengths, rows = _rows_at(args)
  layers = len(rows[0]['weights'])
  maps = [[analysis.attention_map(row, layer) for layer in range(layers)] for row in rows]
  fig = analysis_plots.attention_maps_figure(maps, lengths, run.config.encoding)
  common.make_dir(args.out, '--out')
  _write_png(args.out, 'attention_maps.png', fig)
  print(f'wrote {args.out}/attention_maps.png ({len(lengths)} lengths x {layers} layers)')


def pca_main(args: argparse.Namespace) -> None:
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


def probe_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--length', type=int, default=40, help='input length of the probe')
  parser.add_argument('--test_length', type=int, default=0, help='test inputs (0: --length)')
  parser.add_argument('--examples', type=int, default=32, help='inputs per batch')
  parser.add_argument('--steps', type=int, default=500, help='probe training steps')
  _run_flags(parser, 'position_probe')


def probe_main(args: argparse.Namespace) -> None:
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


def shuffle_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument('--length', type=int, default=64, help='tokens before the scored one')
  parser.add_argument('--examples', type=int, default=256, help='held-out sequences')
  _run_flags(parser, 'prefix_shuffle')


def shuffle_main(args: argparse.Namespace) -> None:
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


def intervene_flags(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    'run', nargs='?', default='', metavar='RUN', help='a trained run directory (or --workdir)'
  )
  parser.add_argument('--workdir', default='', help='a trained run directory')
  parser.add_argument(
    '--intervention',
    required=True,
    help='NAME[:k=v,...], NAME one of position_interpolation, ntk, yarn, '
    'yarn_paper, scalable_softmax, ordered_positions, slope_scale',
  )
  parser.add_argument('--out', default='analysis/intervene')


def intervene_main(args: argparse.Namespace) -> None:
  workdir = args.run or args.workdir
  if not workdir:
    common.fail('give the run: python -m launch.analyze intervene RUN --intervention=NAME')
  if args.run and args.workdir and args.run != args.workdir:
    common.fail(f'two runs given ({args.run} and --workdir={args.workdir}); give one')
  common.check_out_dir(args.out, '--out')
  if os.path.isfile(os.path.join(workdir, 'config.json')) and not checkpoint.saved_steps(workdir):
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
  ),
}


def main(argv: Sequence[str] | None = None) -> None:
  argv = sys.argv[1:] if argv is None else argv
  if argv and argv[0] in common.HELP_FLAGS:
    print(__doc__.strip() + '\n\n`python -m launch.analyze NAME --help` lists the flags of one.')
    sys.exit(0)
  if not argv or argv[0] not in ANALYSES:
    got = argv[0] if argv else '(none)'
    common.fail(f'unknown analysis {got!r}; valid: {", ".join(ANALYSES)}')
  chosen = ANALYSES[argv[0]]
  kept = lambda: 'the files written before it are whole (each is written atomically)'
  with common.on_full_disk(kept, 'the --out directory'):
    parser = _Parser(prog=f'python -m launch.analyze {argv[0]}', description=chosen.help)
    chosen.add_flags(parser)
    chosen.main(parser.parse_args(argv[1:]))


if __name__ == '__main__':
  main()
