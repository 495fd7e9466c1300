"""``python -m kclient ...``: the same as the ``kclient`` console command
(`kclient.cli.main`)."""

import sys

from kclient.cli import main

if __name__ == "__main__":
    sys.exit(main())
