"""Runs `python -m MODULE ARGS...` commands for the tests, each in a fork of one process that
has imported the libraries already, so a command costs its own work and not JAX's import.

Protocol: one JSON request per line on stdin, {"argv": ["launch.train", "--flag", ...],
"cwd": DIR, "env": {NAME: VALUE} (optional, added to the child's environment)}; one JSON
reply per line on stdout, {"returncode", "stdout", "stderr"}. The
child runs the module as `__main__` (runpy) with the argv given, exactly as the command
line would; nothing of the command is imported here, so its flags are defined afresh in
each child.
"""

import json
import os
import runpy
import sys
import tempfile
import traceback

# The libraries every entry point imports; none starts a thread or a backend on import.
import absl.app  # noqa: F401  pylint: disable=unused-import
import flax.linen  # noqa: F401  pylint: disable=unused-import
import jax  # noqa: F401  pylint: disable=unused-import
import matplotlib  # noqa: F401  pylint: disable=unused-import
import ml_collections  # noqa: F401  pylint: disable=unused-import
import optax  # noqa: F401  pylint: disable=unused-import
import orbax.checkpoint  # noqa: F401  pylint: disable=unused-import

# posenc's modules too (1.5 s of every command otherwise): they define no flag and start no
# backend or thread on import (the entry points under launch/ define the flags).
import posenc.analysis  # noqa: F401  pylint: disable=unused-import
import posenc.sweep.cost  # noqa: F401  pylint: disable=unused-import
import posenc.report  # noqa: F401  pylint: disable=unused-import
import posenc.training.train  # noqa: F401  pylint: disable=unused-import


def run_child(argv, cwd, out_path, err_path, env=None):
  """In the child: fds 1 and 2 to files, the module as __main__; never returns."""
  code = 0
  try:
    os.environ.update(env or {})
    os.chdir(cwd)
    sys.path.insert(0, cwd)
    for fd, path in ((1, out_path), (2, err_path)):
      os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
    sys.argv = [argv[0]] + list(argv[1:])
    runpy.run_module(argv[0], run_name='__main__', alter_sys=True)
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if not isinstance(e.code, (int, type(None))):
      print(e.code, file=sys.stderr)
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


def main():
  for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryDirectory() as tmp:
      out_path, err_path = os.path.join(tmp, 'out'), os.path.join(tmp, 'err')
      open(out_path, 'w').close()
      open(err_path, 'w').close()
      pid = os.fork()
      if pid == 0:
        run_child(request['argv'], request['cwd'], out_path, err_path, request.get('env'))
      _, status = os.waitpid(pid, 0)
      code = os.waitstatus_to_exitcode(status)
      with open(out_path) as f_out, open(err_path) as f_err:
        reply = {'returncode': code, 'stdout': f_out.read(), 'stderr': f_err.read()}
    sys.stdout.write(json.dumps(reply) + '\n')
    sys.stdout.flush()


if __name__ == '__main__':
  main()
