"""`python -m memory.cli [--home DIR] ARGS`: `claude-memory [--home DIR] memory ARGS`, for
development (`memory.cli.commands.module_command`)."""

from __future__ import annotations

import subprocess
import sys

from memory.cli.commands import module_command

sys.exit(subprocess.call(module_command(sys.argv[1:])))
