"""Inside the kernel: phase timelines from in-kernel stamps, read beside nsys's record (docs/phases.md).

``layout`` reads the stamps a run folder holds, ``align`` puts them on nsys's time
axis, ``attribute`` splits each kernel's time into phases (per CTA, per SM, the
median call's critical path), ``floor`` reads the floor probes and says when a
row is fixed-cost bound, ``report`` ties them together for a run folder or a round.
Pure polars and numpy: no torch.
"""
