"""Kept for saved config snapshots: `.hydra/config.yaml` files written before December 2026 name the
sweep guard `hermes_exp.secret_guard.SweepGuard` (it lives in hermes_exp/settings/secrets.py)."""

from hermes_exp.settings.secrets import SweepGuard

__all__ = ["SweepGuard"]
