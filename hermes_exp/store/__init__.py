"""The ledger (the run's single source of truth) and everything derived from it."""
