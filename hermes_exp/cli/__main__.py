"""`python -m hermes_exp.cli`: the `hermes-exp` command, without the launcher's re-exec."""

from hermes_exp.cli.app import main

main()
