"""`python -m hermes_exp.mock`: the offline mock model server."""

from hermes_exp.mock.server import main

main()
