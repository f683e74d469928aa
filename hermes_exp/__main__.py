"""`python -m hermes_exp ...`: the `hermes-exp` command (through its launcher, as the console script)."""

from hermes_exp.launch import main

main()
