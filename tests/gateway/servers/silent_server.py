"""A stdio "MCP server" that never answers ``initialize`` (it never reads stdin), with a child process of its own
(as ``npx`` runs node): the gateway must still stop both when it is stopped (issue 78, fault 3).

``--pid-dir DIR``: writes ``server.pid`` and ``child.pid`` there once both run.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--pid-dir", required=True)
args = parser.parse_args()
pid_dir = Path(args.pid_dir)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], stdin=subprocess.DEVNULL)
(pid_dir / "child.pid.tmp").write_text(str(child.pid))
os.replace(pid_dir / "child.pid.tmp", pid_dir / "child.pid")
(pid_dir / "server.pid.tmp").write_text(str(os.getpid()))
os.replace(pid_dir / "server.pid.tmp", pid_dir / "server.pid")
while True:
    time.sleep(3600)
