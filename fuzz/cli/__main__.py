"""``python -m fuzz.cli``: what each ``bnfuzz run --workers`` worker runs."""

import sys

from fuzz.cli import main

sys.exit(main())
