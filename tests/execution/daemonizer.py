"""A child that does what a workload's server launcher does: a double-forked ``setsid`` daemon
that leaves the process group, then the child goes on (or stops while starting, SIGSTOP).
Run by tests/execution/test_child_strays.py as a supervised Child."""

import os
import signal
import sys
import time


def main() -> None:
    pidfile, then = sys.argv[1], sys.argv[2]
    if os.fork() == 0:
        os.setsid()  # a new session and group: killpg of the child's group misses it
        if os.fork() == 0:
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(pidfile + ".tmp", pidfile)
            time.sleep(600)
            os._exit(0)
        os._exit(0)  # the middle process goes: the daemon is an orphan
    os.wait()
    if then == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)  # stopped while starting: no ready event ever
    time.sleep(600)


if __name__ == "__main__":
    main()
