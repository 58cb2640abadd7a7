"""`python tests/scripts/on_host.py NAME -m MODULE ARGS...`: runs `python -m MODULE ARGS` as
if on the host NAME (socket.gethostname() answers NAME), for the tests of a restart on
another host on one machine. The process's PID, start time and boot id stay its own."""

import os
import runpy
import socket
import sys

# The project's root first, as `python -m` from it would have it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
  name, flag, module = sys.argv[1:4]
  if flag != '-m':
    raise SystemExit('usage: on_host.py NAME -m MODULE ARGS...')
  socket.gethostname = lambda: name
  sys.argv = [module, *sys.argv[4:]]
  runpy.run_module(module, run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  main()
