"""A stdio "server" that reads requests and never answers (not even ``initialize``).

Usage: ``python hang_init.py [--ignore-eof] [--ignore-sigterm]``

By default it exits when stdin closes, like a live but stuck server whose client hangs
up. ``--ignore-eof`` keeps it running after that (the client must terminate it), and
``--ignore-sigterm`` also ignores SIGTERM (the client must SIGKILL it).
"""

from __future__ import annotations

import signal
import sys
import time


def main() -> None:
    ignore_eof = "--ignore-eof" in sys.argv
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stderr.write("hang_init: started, will not answer\n")
    sys.stderr.flush()
    for _line in sys.stdin:
        pass
    while ignore_eof:
        time.sleep(3600)


if __name__ == "__main__":
    main()
