"""`python -m hermes_exp.report PATH` is `hermes-exp-report PATH`."""

import sys

from hermes_exp.report.cli import main

sys.exit(main())
