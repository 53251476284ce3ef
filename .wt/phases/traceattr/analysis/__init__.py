"""Analyses over attribution frames: one module per question, frames in, frames out.

* :mod:`calls` — one row per measured call (backend, shape, arm, iteration, times, roles)
* :mod:`summary` — per backend and shape: medians, spread, roles, roofline share, winner
* :mod:`roofline` — bytes and FLOPs of a shape, the GPU's peaks, which bound applies
* :mod:`stats` — is one arm really faster: ratio of medians, bootstrap interval, verdict
"""
